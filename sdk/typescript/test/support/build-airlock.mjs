// Builds the airlock binary from this checkout into .airlock-test/, the way
// the Go end-to-end tests do, so `npm test` runs against the real server.
// Set AIRLOCK_BIN to use a binary built elsewhere instead.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, '..', '..');
const repo = resolve(pkg, '..', '..');

if (process.env.AIRLOCK_BIN) {
  console.log(`using AIRLOCK_BIN=${process.env.AIRLOCK_BIN}`);
} else {
  const out = join(pkg, '.airlock-test', 'airlock');
  mkdirSync(dirname(out), { recursive: true });
  try {
    execFileSync('go', ['build', '-o', out, './cmd/airlock'], { cwd: repo, stdio: 'inherit' });
  } catch (err) {
    console.error(`building airlock from ${repo} failed (the tests need Go, or AIRLOCK_BIN set to a built binary): ${err.message}`);
    process.exit(1);
  }
}
