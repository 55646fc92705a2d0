import { useState } from 'preact/hooks';
import { ApiProblem, api, keepToken } from '../api.js';
import type { Whoami } from '../types.js';

/*
 * Sign-in: the operator pastes a bearer token (from `oduflow-master token
 * new`). It is checked against the service, then kept in this tab's
 * sessionStorage only; it is never shown again.
 */
export function LoginView({ onSignedIn }: { readonly onSignedIn: (me: Whoami) => void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event): Promise<void> => {
    event.preventDefault();
    const value = token.trim();
    if (value === '') {
      setError('Paste your token: the service accepts nothing else.');
      return;
    }
    setBusy(true);
    try {
      const me = await api<Whoami>('/ui/api/whoami', { token: value });
      keepToken(value);
      setToken('');
      onSignedIn(me);
    } catch (problem) {
      setError(
        problem instanceof ApiProblem && problem.status === 401
          ? 'The service does not know this token.'
          : problem instanceof ApiProblem && problem.status === 403
            ? 'This token lacks the read scope.'
            : 'The service did not answer; try again.',
      );
    } finally {
      setBusy(false);
    }
  };

  return (
    <main id="main" class="login">
      <h1>oduflow dashboard</h1>
      <p>Sign in with an oduflow API token. It stays in this browser tab only and is sent to this service alone.</p>
      <form onSubmit={(e) => void submit(e)} noValidate>
        <label for="token">Bearer token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="off"
          spellcheck={false}
          value={token}
          aria-invalid={error === null ? undefined : 'true'}
          aria-describedby={error === null ? undefined : 'token-error'}
          onInput={(e) => setToken(e.currentTarget.value)}
        />
        {error === null ? null : (
          <p id="token-error" class="problem" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}
