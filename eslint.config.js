import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/", ".local/", ".wrangler/", "clients/*/dist/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-empty": ["error", { allowEmptyCatch: true }],
    },
  },
  {
    files: ["local/deps.mjs"],
    languageOptions: { globals: { console: "readonly" } },
  },
  {
    files: ["clients/*.mjs"],
    languageOptions: { globals: { console: "readonly", process: "readonly" } },
  },
);
