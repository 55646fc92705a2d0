// ESLint for every TypeScript and JavaScript file in the repository:
// typescript-eslint's strictest type-aware preset (strictTypeChecked), with
// types from each package's own tsconfig.json through the project service. Run: npm run lint (or npx eslint .).
import js from '@eslint/js';
import globals from 'globals';
import { defineConfig, globalIgnores } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  globalIgnores(['**/dist/', '**/node_modules/', '**/build/', '.venv/', '.nx/', '.test-results/', '.pack/', '**/coverage/']),
  js.configs.recommended,
  tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: {
          // Root-level files that belong to no package's tsconfig.json.
          allowDefaultProject: ['*.ts'],
        },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // A number renders the same way everywhere; `undefined`, `null`, an
      // object or an array in a message is still a bug and still reported.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      // `afterEach(() => rmSync(dir))` and `if (bad) return fail(error);` in a
      // function typed void say what they mean; a void value used anywhere
      // else (assigned, passed, in a condition) is still reported.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true, ignoreVoidReturningFunctions: true }],
      // `const { secret: _secret, ...rest } = record` drops a field on purpose.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', caughtErrors: 'all', caughtErrorsIgnorePattern: '^_' },
      ],
    },
  },
  {
    // JavaScript files are plain Node scripts: no types to check them against.
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: {
      globals: globals.node,
    },
  },
  {
    // CommonJS files load modules with require().
    files: ['**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
