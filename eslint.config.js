// ESLint flat config: typescript-eslint's recommended type-aware rules over every TypeScript folder.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'test/harness/kube-bins/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    files: ['eslint.config.js', 'scripts/*.mjs', 'deploy/helm/*/files/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    // Plain Node scripts: declare the Node globals they use (no type information there).
    languageOptions: {
      parserOptions: { project: false, projectService: false },
      globals: { process: 'readonly', console: 'readonly', URL: 'readonly', Buffer: 'readonly', fetch: 'readonly', setTimeout: 'readonly' },
    },
  },
);
