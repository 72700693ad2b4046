// Writes the package.json markers that tell Node which module system each half of a
// dual-built package uses: dist/esm is ESM, dist/cjs is CommonJS.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dist = process.argv[2] ?? 'dist';
writeFileSync(join(dist, 'esm', 'package.json'), JSON.stringify({ type: 'module' }) + '\n');
writeFileSync(join(dist, 'cjs', 'package.json'), JSON.stringify({ type: 'commonjs' }) + '\n');
