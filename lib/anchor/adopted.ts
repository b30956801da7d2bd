// The host side of an adopted anchor: a leased anchor another host started,
// reached through its adoption endpoint (lib/adopt.ts). The connection is the
// control channel: the replay of the tree's life so far, then its events as
// they come; TERM, KILL and DONE go the other way. The anchor is not this
// host's child: nothing here reaps or signals it. Its end of the connection
// closes when it exits (after QUIET) or dies; that EOF is its exit. The same
// on every platform: what differs (how the connection was made, how a line is
// written to it) comes in the AdoptedAnchor the platform's endpoint gave.
import type { Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { AnchorChannel, type AnchorHandlers, type AnchorProcess } from './channel.js';
import type { AnchorEvent } from './protocol.js';

/** What a granted ADOPT hands over (the platform's endpoint makes it: anchor/posix-endpoint.ts, anchor/windows-endpoint.ts). */
export interface AdoptedAnchor {
  /** The connection, now the tree's control channel (paused until a channel reads it). */
  socket: Socket;
  /** What was read after the ADOPTED line (the start of the replay). */
  pending: string;
  /** Writes one host command line on the connection (dropped if it is gone). */
  write(line: string): void;
  /** The tree's log as the anchor names it (null: none). */
  logPath: string | null;
  /** The tree's captured output from now on (null: not captured, or its writers were all gone). */
  stdout: Readable | null;
  stderr: Readable | null;
  /** A tree with a terminal (POSIX): what is typed into it; else null (an adopted tree's stdin is not given). */
  stdin?: Writable | null;
  /**
   * Whether the adopting host appends the output to the log itself (POSIX:
   * it gets the pipes' read ends), or the anchor does and relays a copy
   * (Windows).
   */
  hostWritesLog: boolean;
}

export class AdoptedAnchorChannel extends AnchorChannel {
  readonly child: AnchorProcess & { readonly pid: number };
  private readonly write: (line: string) => void;
  private quiescentSeen = false;

  constructor(adopted: AdoptedAnchor, anchorPid: number, on: AnchorHandlers, exitGrace: number) {
    super(on, exitGrace);
    this.leased = true;
    this.write = adopted.write;
    this.child = { pid: anchorPid, stdin: adopted.stdin ?? null, stdout: adopted.stdout, stderr: adopted.stderr, ref: () => {}, unref: () => {} };
    this.listen(adopted.socket, adopted.pending);
    adopted.socket.resume();
    this.register();
  }

  /** A host exit leaves an adopted tree to its lease, as its first host did: nothing to do. */
  terminateSync(): void {}

  protected override send(line: string): void {
    if (this.open && !this.socket.destroyed) this.write(line);
  }

  protected override observe(event: AnchorEvent): void {
    if (event.type === 'quiescent') this.quiescentSeen = true;
  }

  /** The anchor's end closed: it exited (after QUIET: cleanly), or died. */
  protected override closedBeforeExit(): void {
    this.anchorExited(this.quiescentSeen ? 0 : null, null);
  }
}
