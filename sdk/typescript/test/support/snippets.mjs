// Reads the marked code blocks of README.md and docs/**/*.md, so a test can
// run each as printed. A block is marked by an HTML comment on the line
// before its fence: `<!-- snippet: NAME ... -->` (run by a test) or
// `<!-- not run: WHY -->`. A TypeScript, JavaScript or Python block with
// neither is an error: every SDK snippet the docs print must run.
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');

/** The languages whose blocks must be marked. */
const sdkLanguages = new Set(['ts', 'typescript', 'js', 'javascript', 'mjs', 'python', 'py']);

function markdownFiles() {
  const out = [join(repo, 'README.md')];
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else if (e.name.endsWith('.md')) out.push(join(d, e.name));
    }
  };
  walk(join(repo, 'docs'));
  return out;
}

/**
 * Every fenced block of an SDK language in the docs: {file, line, lang,
 * name (undefined for a `not run` block), code}. Throws on an unmarked one.
 */
export function snippets() {
  const found = [];
  const unmarked = [];
  for (const file of markdownFiles()) {
    const lines = readFileSync(file, 'utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      const open = /^```(\w+)\s*$/.exec(lines[i]);
      if (!open) continue;
      const end = lines.indexOf('```', i + 1);
      if (end < 0) throw new Error(`${relative(repo, file)}:${i + 1}: a code block that never closes`);
      const lang = open[1];
      const code = lines.slice(i + 1, end).join('\n') + '\n';
      const before = i > 0 ? lines[i - 1] : '';
      const mark = /^<!-- snippet: (.+?)(?: \(run by [^)]*\))? -->$/.exec(before);
      const skip = /^<!-- not run: .+ -->$/.test(before);
      if (sdkLanguages.has(lang)) {
        if (mark) found.push({ file: relative(repo, file), line: i + 1, lang, name: mark[1], code });
        else if (!skip) unmarked.push(`${relative(repo, file)}:${i + 1} (${lang})`);
      }
      i = end;
    }
  }
  if (unmarked.length) {
    throw new Error(`code blocks no test runs; mark each with <!-- snippet: NAME --> and run it, or <!-- not run: WHY -->:\n  ${unmarked.join('\n  ')}`);
  }
  return found;
}

/** The blocks called name; fails when there is none, or when copies differ. */
export function snippet(name) {
  const all = snippets().filter((s) => s.name === name);
  if (all.length === 0) throw new Error(`no code block is marked <!-- snippet: ${name} --> in README.md or docs/`);
  for (const s of all.slice(1)) {
    if (s.code !== all[0].code) throw new Error(`the "${name}" snippet at ${s.file}:${s.line} differs from the one at ${all[0].file}:${all[0].line}`);
  }
  return all[0];
}
