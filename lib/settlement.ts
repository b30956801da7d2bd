// How far a tree's result has come, and what moves it (C3, C4, C5, C6). The
// anchor's protocol orders the facts (facts.ts): READY or a launch failure,
// then EXIT, its LEFT lines and LEFTEND; RELEASED and QUIET come only after
// LEFTEND. From them the result goes through these stages:
// - 'open': until the root has exited and its leftovers are listed;
// - 'draining': waiting for the captured output to be released (or the wait
//   delay) and its readers to take it; then the leftovers policy is applied;
// - 'awaiting-quiescence': the policy let nothing run on: waiting for QUIET
//   and the anchor's exit (QUIET alone where the anchor lets go then: TreeFacts.anchorLetGo);
// - 'settling': the outcome is decided; the log is flushed (bounded);
// - 'settled': the result has resolved or rejected.
// A launch failure (once its anchor is gone) or a cleanup failure goes to
// 'settling' from wherever it is. The tree itself may live on after the
// result (kept leftovers): its state is TreeFacts.state, not this.
import type { ConfinedResult } from './confine.js';
import type { Coverage } from './capabilities.js';
import type { CordonError } from './errors.js';
import { Deferred, type TreeFacts } from './facts.js';
import type { LimitsPlan } from './limits.js';
import type { LeftoversPolicy } from './options.js';
import type { TreeOutput } from './output.js';
import { buildResult, rootFailed, type ContainedResult, type Leftover } from './result.js';

type Stage = 'open' | 'draining' | 'awaiting-quiescence' | 'settling' | 'settled';

export interface SettlementParts {
  facts: TreeFacts;
  output: TreeOutput;
  /** What happens to leftovers, and the grace they are terminated with. */
  leftovers: LeftoversPolicy;
  grace: number;
  /** The anchor's TERM (KILL at grace 0), and letting the host exit while a kept tree runs. */
  anchor: { terminate(graceMs: number): void; unref(): void };
  /** What the result says besides the facts. */
  describe: { command: string; args: readonly string[]; limits: LimitsPlan | undefined; confined?: ConfinedResult | undefined; startedAt: number; logPath: string | undefined; coverage(): Coverage };
  /** Leftovers were found: they are being killed, or kept. */
  onLeftovers(leftovers: Leftover[], fate: 'killing' | 'kept'): void;
  /** The result resolved. */
  onSettled(result: ContainedResult): void;
  /** The result is out: what the facade stops doing (its timeout, its abort listener). */
  onDone(): void;
}

export class Settlement {
  /** The facade cancelled the root (AbortSignal, timeout) before it exited. */
  cancelReason: 'canceled' | 'timeout' | undefined;
  /** The stop hook threw or rejected with this. */
  stopError: { error: unknown } | undefined;
  private stage: Stage = 'open';
  /** The host asked the anchor to end the tree: the policy neither runs again nor reports leftovers as 'kept'. */
  private terminateSent = false;
  /** The leftovers policy kept them running: the result's `leftoversKept`. */
  private kept = false;
  private readonly resultD = new Deferred<ContainedResult>();

  constructor(private readonly parts: SettlementParts) {}

  /** Resolves with the result; rejects with a launch or cleanup failure (carrying the result where the root ran). Made when first asked for. */
  get result(): Promise<ContainedResult> {
    return this.resultD.promise;
  }

  /**
   * Called once the tree is quiescent: resolves (never rejects) when its
   * result is out, which is then once the readers took the output (bounded by
   * the wait delay where a process the tier cannot see holds a pipe); at once
   * where the root's exit is not in, so no result follows. terminate() waits
   * for this, so code that awaits it and then looks at what it read sees all of it.
   */
  afterQuiescence(): Promise<void> {
    return this.stage === 'open' ? Promise.resolve() : this.result.then(ignore, ignore);
  }

  /** The result's outcome is fixed (it may still be flushing the log). */
  get decided(): boolean {
    return this.stage === 'settling' || this.stage === 'settled';
  }

  /** The anchor's TERM with this grace (KILL at 0), unless the anchor is gone. */
  terminate(graceMs: number): void {
    if (this.parts.facts.anchorGone) return;
    this.terminateSent = true;
    this.parts.anchor.terminate(graceMs);
  }

  /** The stop hook is being asked to end the tree: what remains is not kept. */
  ending(): void {
    this.terminateSent = true;
  }

  /** Takes the result as far as the facts allow; called on every fact that may move it. */
  advance(): void {
    if (this.decided) return;
    const { facts, output } = this.parts;
    if (facts.launchError) {
      if (facts.anchorGone) this.settle(facts.launchError);
      return;
    }
    if (facts.cleanupError) {
      this.settle(facts.cleanupError);
      return;
    }
    if (this.stage === 'open') {
      if (!facts.rootExit || !facts.leftoversListed) return;
      this.stage = 'draining';
    }
    if (!output.drained) {
      if (!facts.released && !facts.quiescentSeen) return;
      output.release();
    }
    if (!output.readersDone) return;
    if (this.stage === 'draining') {
      this.applyLeftoversPolicy();
      if (this.kept) {
        // Kept trees stay under this handle (terminate() still reaches them)
        // but no longer hold the host's event loop open; host exit ends them.
        this.parts.anchor.unref();
        this.settle();
        return;
      }
      this.stage = 'awaiting-quiescence';
    }
    if (facts.quiescentSeen && facts.anchorDone) this.settle();
  }

  /** C5: what happens to what is left of the tree; nothing to decide once it is quiescent or already being ended. */
  private applyLeftoversPolicy(): void {
    const { facts, output, leftovers: policy } = this.parts;
    if (facts.quiescentSeen || this.terminateSent) return;
    const kill = policy === 'kill' || (policy === 'kill-on-failure' && rootFailed(facts.rootExit!, this.cancelReason !== undefined, output.waitDelayExceeded));
    if (kill) this.terminate(this.parts.grace);
    else this.kept = true;
    if (facts.leftovers.length > 0) this.parts.onLeftovers(facts.leftovers, kill ? 'killing' : 'kept');
  }

  private settle(error?: CordonError): void {
    this.stage = 'settling';
    this.parts.output.seal();
    // (Everything the command wrote is in the log already: each chunk is
    // written as it is read, TreeOutput.writeLog.)
    this.finish(error);
  }

  private finish(error?: CordonError): void {
    this.stage = 'settled';
    this.parts.output.resultOut();
    this.parts.onDone();
    if (error) {
      if (this.parts.facts.rootExit) error.result = this.build();
      this.resultD.reject(error);
      return;
    }
    const result = this.build();
    this.resultD.resolve(result);
    this.parts.onSettled(result);
  }

  private build(): ContainedResult {
    const { facts, output, describe } = this.parts;
    return buildResult({
      command: describe.command,
      args: describe.args,
      pid: facts.pid,
      tier: facts.tier,
      rootExit: facts.rootExit!,
      cancelReason: this.cancelReason,
      limits: describe.limits,
      confined: describe.confined,
      limitsInForce: facts.limitsInForce,
      usage: facts.usage,
      waitDelayExceeded: output.waitDelayExceeded,
      leftovers: facts.leftovers,
      kept: this.kept,
      coverage: describe.coverage(),
      leavers: facts.leavers,
      startedAt: describe.startedAt,
      logPath: describe.logPath,
      stopError: this.stopError,
    });
  }
}

function ignore(): void {}
