// The build needs the dev dependencies (TypeScript): say how to get them, instead of
// leaving the shell's "tsc: not found" to explain a fresh clone's first `npm pack`.
import { createRequire } from "node:module";

try {
  createRequire(import.meta.url).resolve("typescript/package.json");
} catch {
  console.error(
    "makad-client: building needs the dev dependencies (TypeScript): run `npm ci` in clients/node first, then run this again",
  );
  process.exit(1);
}
