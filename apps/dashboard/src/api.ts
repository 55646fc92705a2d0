/*
 * Calls to the service, with the operator's bearer token. The token lives
 * only in this tab's sessionStorage (gone when the tab closes, never in a
 * cookie, a URL or localStorage) and is sent as an Authorization header, so
 * the API's own authentication applies unchanged and no other site can make
 * the browser send it (no ambient credential: nothing to forge across sites).
 */

const TOKEN_KEY = 'oduflow.token';

export function storedToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function keepToken(token: string): void {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function forgetToken(): void {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** An RFC 9457 problem the service answered (or a network failure, status 0). */
export class ApiProblem extends Error {
  override readonly name = 'ApiProblem';
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, detail: string) {
    super(detail);
    this.status = status;
    this.code = code;
  }
}

type Listener = () => void;
const signedOut = new Set<Listener>();

/** Called when the service no longer accepts the token (401): the app shows the sign-in page. */
export function onSignedOut(listener: Listener): () => void {
  signedOut.add(listener);
  return () => signedOut.delete(listener);
}

export function authHeaders(token: string | null = storedToken()): Record<string, string> {
  return token === null ? {} : { authorization: `Bearer ${token}` };
}

async function problemOf(response: Response): Promise<ApiProblem> {
  try {
    const body = (await response.json()) as { code?: unknown; detail?: unknown };
    return new ApiProblem(response.status, typeof body.code === 'string' ? body.code : 'error', typeof body.detail === 'string' ? body.detail : response.statusText);
  } catch {
    return new ApiProblem(response.status, 'error', response.statusText);
  }
}

export async function api<T>(path: string, init: { readonly method?: string; readonly body?: unknown; readonly token?: string } = {}): Promise<T> {
  let response: Response;
  try {
    response = await fetch(path, {
      method: init.method ?? 'GET',
      headers: {
        accept: 'application/json',
        ...authHeaders(init.token ?? storedToken()),
        ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch {
    throw new ApiProblem(0, 'network', 'the service did not answer');
  }
  if (!response.ok) {
    const problem = await problemOf(response);
    if (response.status === 401 && init.token === undefined) {
      forgetToken();
      for (const listener of [...signedOut]) listener();
    }
    throw problem;
  }
  return (await response.json()) as T;
}
