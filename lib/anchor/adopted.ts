// The host side of an adopted anchor (issue #17, lib/lease.ts): a leased
// anchor another host started, reached through its adoption endpoint. The
// connection is the control channel (the replay of the tree's life so far,
// then events as they come; TERM and KILL go the other way). The anchor is
// not this host's child: nothing here reaps or signals it. Its end of the
// connection closes when it exits (after QUIET) or dies; that EOF is its exit.
import { writeSync } from 'node:fs';
import { Socket } from 'node:net';
import { debug } from '../debug.js';
import type { Adoption } from '../lease.js';
import { AnchorChannel, type AnchorHandlers, type AnchorProcess } from './channel.js';
import { encodeCommand, type AnchorEvent } from './protocol.js';

export class AdoptedAnchorChannel extends AnchorChannel {
  readonly child: AnchorProcess & { readonly pid: number };
  private readonly fd: number;
  private quiescentSeen = false;

  constructor(adoption: Adoption, on: AnchorHandlers, exitGrace: number) {
    super(on, exitGrace);
    this.fd = adoption.fd;
    this.leased = true;
    const { stdoutFd, stderrFd } = adoption;
    const socket = new Socket({ fd: adoption.fd, readable: true, writable: true });
    this.child = {
      pid: adoption.record.anchorPid,
      stdin: null,
      stdout: stdoutFd >= 0 ? new Socket({ fd: stdoutFd, readable: true, writable: false }) : null,
      stderr: stderrFd >= 0 ? new Socket({ fd: stderrFd, readable: true, writable: false }) : null,
      ref: () => {},
      unref: () => {},
    };
    this.listen(socket, adoption.rest);
    this.register();
  }

  /** A host exit leaves an adopted tree to its lease, as its first host did: never called for it. */
  terminateSync(): void {}

  protected override send(line: string): void {
    if (!this.open || this.socket.destroyed) return;
    try {
      writeSync(this.fd, line);
    } catch (err) {
      debug('control write to adopted anchor failed (it is exiting): %s', (err as Error).message);
    }
  }

  protected override observe(event: AnchorEvent): void {
    if (event.type === 'quiescent') this.quiescentSeen = true;
  }

  /** The anchor's end closed: it exited (after QUIET: cleanly), or died. */
  protected override closedBeforeExit(): void {
    this.anchorExited(this.quiescentSeen ? 0 : null, null);
  }
}
