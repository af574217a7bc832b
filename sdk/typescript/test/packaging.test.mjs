// The package as npm packs it: it names its licence, and carries the
// licence's text, which prepack copies from the repository's root.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkgDir = join(dirname(fileURLToPath(import.meta.url)), '..');

test('the package is Apache-2.0 and carries the LICENSE text', () => {
  const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
  assert.equal(pkg.license, 'Apache-2.0');
  const [packed] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--loglevel=error'], { cwd: pkgDir, encoding: 'utf8' }));
  assert.ok(packed.files.some((f) => f.path === 'LICENSE'), `npm pack lists ${packed.files.map((f) => f.path)}`);
  assert.equal(readFileSync(join(pkgDir, 'LICENSE'), 'utf8'), readFileSync(join(pkgDir, '..', '..', 'LICENSE'), 'utf8'));
});
