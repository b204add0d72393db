import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  // test/fixtures/*.cjs are plain scripts run against dist/ by child-process tests.
  { ignores: ['dist/**', 'packages/client/dist/**', 'node_modules/**', 'bench/out/**', 'eslint.config.mjs', 'test/fixtures/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      // scripts/*.mjs are plain Node scripts outside the TypeScript project.
      parserOptions: { projectService: { allowDefaultProject: ['scripts/*.mjs'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // Servers are created before the object their handlers close over.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      'no-restricted-properties': [
        'error',
        { object: 'it', property: 'only', message: '.only silences the rest of the suite' },
        { object: 'describe', property: 'only', message: '.only silences the rest of the suite' },
        { object: 'test', property: 'only', message: '.only silences the rest of the suite' },
      ],
    },
  },
  {
    // The gateway runs without the client package (the image holds no link to it: Dockerfile,
    // deps stage); it may share the client's types, which the build erases, never its values.
    files: ['src/**/*.ts', 'sandbox/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        { paths: [{ name: '@longrun/client', allowTypeImports: true, message: 'the gateway may import only types from @longrun/client (import type)' }] },
      ],
    },
  },
);
