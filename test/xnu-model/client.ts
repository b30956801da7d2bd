// The tests' line to the model of XNU's process table (kernel.cc), beside the
// shim that cordon's darwin build calls: what the model keeps of a process,
// its counters, and XNU's calls asked directly (model.h says the wire).
// Only where the model runs (CORDON_XNU_MODEL: .ci/darwin-model.sh).
import { connect } from 'node:net';
import { watchdog } from '../helpers/time.js';

export const modelSocket = process.env.CORDON_XNU_MODEL ?? '';
/** The XNU whose rules the model follows (.ci/darwin-model.sh: CORDON_XNU_RELEASE). */
export const modelRelease = process.env.CORDON_XNU_RELEASE ?? '15.4';

const Op = { listPids: 1, pidInfo: 2, procArgs2: 6, stats: 8, model: 9 } as const;

export interface ModelRecord {
  pid: number;
  /** The parent as XNU has it: launchd (1) once the one that forked it exited. */
  ppid: number;
  uniqueid: number;
  puniqueid: number;
  idversion: number;
  origPpidversion: number;
  restricted: boolean;
  zombie: boolean;
  /** Its place in the kernel's list: higher is nearer the head. */
  seq: number;
  comm: string;
  exe: string;
}

interface Answer {
  error: number;
  value: number;
  data: Buffer;
}

/** One request, answered (bounded: the model answers at once or is broken). */
function ask(op: number, pid: number, fields: { a?: number; b?: number; size?: number } = {}): Promise<Answer> {
  const req = Buffer.alloc(44);
  req.writeUInt32LE(40, 0);
  req.writeUInt32LE(op, 4);
  req.writeInt32LE(pid, 8);
  req.writeUInt32LE(fields.a ?? 0, 12);
  req.writeUInt32LE(fields.b ?? 0, 16);
  req.writeUInt32LE(fields.size ?? 0, 28);
  req.writeInt32LE(process.pid, 32);
  req.writeUInt32LE(process.geteuid?.() ?? 0, 36);
  req.writeUInt32LE(process.getuid?.() ?? 0, 40);
  return new Promise((resolve, reject) => {
    const sock = connect(modelSocket);
    let got = Buffer.alloc(0);
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`watchdog: the model's kernel did not answer op ${op} within 10 s`));
    }, watchdog(10_000));
    sock.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    sock.on('data', (chunk) => {
      got = Buffer.concat([got, chunk]);
      if (got.length < 4) return;
      const total = got.readUInt32LE(0);
      if (got.length < 4 + total) return;
      clearTimeout(timer);
      sock.destroy();
      resolve({ error: got.readInt32LE(4), value: got.readInt32LE(8), data: got.subarray(12, 4 + total) });
    });
    sock.write(req);
  });
}

/** The model's record of `pid`, or undefined when it has none (gone). */
export async function record(pid: number): Promise<ModelRecord | undefined> {
  const a = await ask(Op.model, pid);
  return a.error === 0 ? (JSON.parse(a.data.toString('utf8')) as ModelRecord) : undefined;
}

/** The model's counters (calls by XNU interface, processes its list walks went through, events lost). */
export async function stats(): Promise<Record<string, unknown> & { lost: number; listpidsWalked: number; calls: Record<string, number> }> {
  const a = await ask(Op.stats, 0);
  return JSON.parse(a.data.toString('utf8')) as never;
}

/** proc_listpids(PROC_ALL_PIDS): every pid in the kernel's list order, newest first. */
export async function listAll(): Promise<number[]> {
  const a = await ask(Op.listPids, 0, { a: 1, size: 1 << 20 });
  const pids: number[] = [];
  for (let i = 0; i + 4 <= a.data.length; i += 4) pids.push(a.data.readInt32LE(i));
  return pids;
}

/** proc_pidinfo(PROC_PIDT_SHORTBSDINFO) of `pid`: its status (SZOMB 5) and flags (PROC_FLAG_INEXIT 4), or the errno. */
export async function shortInfo(pid: number): Promise<{ status: number; flags: number } | number> {
  // struct proc_bsdshortinfo: pid, ppid, pgid, status (uint32 each), comm[16], flags (uint32), ...
  const a = await ask(Op.pidInfo, pid, { a: 13, size: 64 });
  return a.error === 0 ? { status: a.data.readUInt32LE(12), flags: a.data.readUInt32LE(32) } : a.error;
}

/** kern.procargs2 of `pid` as this process would get it: the buffer, or the errno. */
export async function procargs2(pid: number): Promise<Buffer | number> {
  const a = await ask(Op.procArgs2, pid, { size: 1 << 20 });
  return a.error === 0 ? a.data : a.error;
}
