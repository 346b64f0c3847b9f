// dist/cjs holds CommonJS although the package is "type": "module": say so for Node.
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const target = join(dirname(fileURLToPath(import.meta.url)), "..", "dist", "cjs", "package.json");
writeFileSync(target, `${JSON.stringify({ type: "commonjs" }, null, 2)}\n`);
