import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ReportStatus } from './types.js';

// The journal is what a Gate keeps on disk so that a call runs at most once
// even across restarts, and so that a run a crash interrupted is reported
// unknown instead of being run again. It is a directory with one small
// append-only file per call (named by a hash of the call's idempotency key,
// as the Go gate's); each line is one step:
//
//   requested <request id> <key>    the request exists (after create)
//   claiming  <request id>          about to claim the execution
//   claimed   <request id>          the server granted the claim; the call may start
//   refused   <request id> <code>   the server refused the claim
//   finished  <request id> <status> the call ended: succeeded, failed or unknown
//   reported  <request id> <status> the server has the outcome
//
// Every line is written before the gate goes on, so it survives the process
// being killed. The "claiming" line is written before the claim is sent and
// made durable (fsynced, with the journal directory) while the claim is in
// flight; the call starts only once both are done, so a call never starts
// without a record that survives the machine losing power too. A restart
// that finds it, and an execution on the server, reports unknown and never
// runs the call; the server grants one claim only, so nothing else decides
// whether the call can run twice (docs/sdks.md, "The journal", walks
// through each crash point). The other lines only make the report more
// precise (started or not, succeeded rather than unknown); syncEveryStep
// fsyncs each of them before the gate goes on, which costs about a
// millisecond per line on a typical disk.
//
// A call's file stays open while the gate works on that call (release()
// closes it), so a call opens its file once, not once per line.
//
// A last line without its newline was torn by a crash and never counted. The
// directory is locked while a gate has it open (a lock file holding the
// owner's process ID; a lock whose process is gone is taken over), so two
// live processes never share one.

export type RecKind = 'requested' | 'claiming' | 'claimed' | 'refused' | 'finished' | 'reported';

/** What the journal knows of one call. */
export interface Entry {
  key: string;
  requestId: string;
  /** A claim was sent; its answer may be lost. */
  claiming: boolean;
  claimed: boolean;
  refused: boolean;
  /** Set once the call ended. */
  finished?: ReportStatus;
  reported: boolean;
}

/** Whether the server has everything this entry knows. */
export function settled(e: Entry): boolean {
  if (e.finished) return e.reported;
  return !e.claimed && !e.claiming;
}

const LOCK = '.lock';

export class Journal {
  /** The open file of each call the gate is working on, by path. */
  private readonly fds = new Map<string, number>();
  /** Files this process created, and how many of them the last directory fsync covered. */
  private created = 0;
  private dirSynced = 0;
  /** The last directory fsync started. */
  private dirSync: Promise<void> | undefined;
  /** The fsync durable() uses; tests replace it to slow it down or make it fail. */
  fsync: (fd: number) => Promise<void> = fsyncAsync;

  private constructor(readonly dir: string, private readonly lockPath: string, private readonly syncEveryStep: boolean) {}

  /** Creates (if needed) and locks dir; fsyncs the directory, so the files an earlier process left are durable. */
  static open(dir: string, syncEveryStep = false): Journal {
    if (!dir) throw new TypeError('airlock gate: a journal directory is required: it is how a call runs at most once across restarts');
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const lockPath = path.join(dir, LOCK);
    for (let i = 0; i < 2; i++) {
      try {
        const fd = fs.openSync(lockPath, 'wx', 0o600);
        fs.writeSync(fd, `${process.pid}\n`);
        fs.fsyncSync(fd);
        fs.closeSync(fd);
        syncDir(dir);
        return new Journal(dir, lockPath, syncEveryStep);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const holder = Number.parseInt(readOr(lockPath, '').trim(), 10);
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && alive(holder)) {
        throw new Error(`airlock gate: journal ${dir} is in use by process ${holder}; give each gate process its own journal directory`);
      }
      if (holder === process.pid) {
        throw new Error(`airlock gate: journal ${dir} is already open in this process; share one Gate instead of opening two`);
      }
      // The holder is gone (it crashed): take the lock over.
      fs.rmSync(lockPath, { force: true });
    }
    throw new Error(`airlock gate: could not lock journal ${dir}`);
  }

  close(): void {
    for (const fd of this.fds.values()) closeQuietly(fd);
    this.fds.clear();
    if (readOr(this.lockPath, '').trim() === String(process.pid)) fs.rmSync(this.lockPath, { force: true });
  }

  private file(key: string): string {
    return path.join(this.dir, createHash('sha256').update(key).digest('hex').slice(0, 32) + '.log');
  }

  /**
   * Writes one line for key before returning (it survives the process being
   * killed); with syncEveryStep it is fsynced too, with its file's directory
   * entry. durable() makes it survive a power cut.
   */
  append(key: string, kind: RecKind, requestId: string, ...more: string[]): void {
    const fd = this.openFile(key);
    fs.writeSync(fd, [kind, requestId, ...more, new Date().toISOString()].join(' ') + '\n');
    if (this.syncEveryStep) {
      fs.fsyncSync(fd);
      if (this.dirSynced < this.created) {
        const upto = this.created;
        syncDir(this.dir); // a new file is durable only once its directory entry is
        this.dirSynced = Math.max(this.dirSynced, upto);
      }
    }
  }

  /**
   * Opens key's file on the thread pool, creating it if needed. The gate
   * calls it as it sends the request's creation, so that it overlaps the
   * round trip, and awaits it before its first line. An empty file is an
   * entry with nothing in it. (The new directory entry is fsynced by
   * durable(), together with the file: started together, the two fsyncs
   * share one journal commit on ext4; a directory fsync started earlier
   * makes the file's wait for a second one.)
   */
  prepare(key: string): Promise<void> {
    const p = this.file(key);
    if (this.fds.has(p)) return Promise.resolve();
    const isNew = !fs.existsSync(p);
    return new Promise<void>((resolve, reject) => {
      fs.open(p, 'a', 0o600, (err, fd) => {
        if (err) return reject(err);
        if (this.fds.has(p)) {
          closeQuietly(fd); // opened meanwhile
          return resolve();
        }
        this.adopt(p, fd, isNew);
        resolve();
      });
    });
  }

  /** key's open file, opened (and created) now if it is not. */
  private openFile(key: string): number {
    const p = this.file(key);
    const fd = this.fds.get(p);
    if (fd !== undefined) return fd;
    const isNew = !fs.existsSync(p);
    const opened = fs.openSync(p, 'a', 0o600);
    this.adopt(p, opened, isNew);
    return opened;
  }

  private adopt(p: string, fd: number, isNew: boolean): void {
    this.fds.set(p, fd);
    if (isNew) this.created++;
  }

  /** Starts a directory fsync covering every file created so far, unless one is in flight that does. */
  private syncDirSoon(): Promise<void> {
    if (this.dirSynced >= this.created) return Promise.resolve();
    const upto = this.created;
    const run: Promise<void> = (this.dirSync ?? Promise.resolve()).catch(() => {}).then(async () => {
      if (this.dirSynced >= upto) return;
      await syncDirAsync(this.dir);
      this.dirSynced = Math.max(this.dirSynced, upto);
    });
    this.dirSync = run;
    return run;
  }

  /**
   * Makes key's lines durable: fsyncs its file and, when this process
   * created a file since the last time, the directory (a new file is
   * durable only once its directory entry is). Asynchronous, so the gate
   * sends its claim meanwhile. Resolves once both are done; the caller
   * awaits it before release().
   */
  async durable(key: string): Promise<void> {
    if (this.syncEveryStep) return; // append did it
    const fd = this.fds.get(this.file(key));
    if (fd === undefined) throw new Error(`airlock gate: journal: nothing written for ${key}`);
    const jobs: Promise<void>[] = [this.fsync(fd), this.syncDirSoon()];
    const failed = (await Promise.allSettled(jobs)).find((s) => s.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  /** Closes key's file: the gate is done with the call for now. */
  release(key: string): void {
    const p = this.file(key);
    const fd = this.fds.get(p);
    if (fd === undefined) return;
    this.fds.delete(p);
    closeQuietly(fd);
  }

  /** The entry of key; an empty one when there is none. */
  read(key: string): Entry {
    const p = this.file(key);
    if (!fs.existsSync(p)) return empty(key);
    return parse(p, key);
  }

  /** Every entry of the journal. */
  entries(): Entry[] {
    return fs.readdirSync(this.dir).filter((f) => f.endsWith('.log')).map((f) => parse(path.join(this.dir, f), ''));
  }
}

function empty(key: string): Entry {
  return { key, requestId: '', claiming: false, claimed: false, refused: false, reported: false };
}

function parse(p: string, key: string): Entry {
  let data = fs.readFileSync(p, 'utf8');
  const last = data.lastIndexOf('\n');
  data = data.slice(0, last + 1); // a torn last line: its step never counted
  const e = empty(key);
  for (const line of data.split('\n')) {
    if (line === '') continue;
    const f = line.split(' ').filter((s) => s !== '');
    if (f.length < 2) throw new Error(`journal ${p}: malformed line ${JSON.stringify(line)}`);
    if (!e.requestId) e.requestId = f[1]!;
    switch (f[0] as RecKind) {
      case 'requested':
        if (f.length > 3) e.key = f[2]!;
        break;
      case 'claiming':
        e.claiming = true;
        e.refused = false;
        break;
      case 'claimed':
        e.claimed = true;
        break;
      case 'refused':
        e.claiming = false;
        e.refused = true;
        break;
      case 'finished':
        e.finished = f[2] as ReportStatus;
        break;
      case 'reported':
        e.reported = true;
        break;
      default:
        throw new Error(`journal ${p}: unknown record ${JSON.stringify(f[0])}`);
    }
  }
  return e;
}

function syncDir(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
  } finally {
    fs.closeSync(fd);
  }
}

/** fsync on libuv's thread pool: the event loop goes on meanwhile. */
function fsyncAsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fsync(fd, (err) => (err ? reject(err) : resolve())));
}

async function syncDirAsync(dir: string): Promise<void> {
  const fd = fs.openSync(dir, 'r');
  try {
    await fsyncAsync(fd);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err; // some filesystems cannot sync a directory
  } finally {
    fs.closeSync(fd);
  }
}

function closeQuietly(fd: number): void {
  try {
    fs.closeSync(fd);
  } catch {
    // already closed
  }
}

function readOr(p: string, fallback: string): string {
  try {
    return fs.readFileSync(p, 'utf8');
  } catch {
    return fallback;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
