import type { RolloutProgress, TargetRow } from '@oduflow/master-runner';
import cliProgress from 'cli-progress';

/*
 * A rollout's progress on stderr (stdout keeps only the final report):
 * - on a terminal, a live bar (cli-progress) with the batch and the outcomes
 *   so far;
 * - otherwise, one plain line per event (a log, a CI job);
 * - with --json, one JSON line per event (`{"progress":"rollout_…",…}`),
 *   like poll --watch's rounds.
 * Every field shown is an id, a code or a count.
 */

export type ProgressMode = 'bar' | 'lines' | 'json';

export interface ProgressSink {
  readonly onProgress: (event: RolloutProgress) => void;
  /** Stops the bar (idempotent), leaving its last frame on the terminal. */
  readonly stop: () => void;
}

/** The mode for this invocation: JSON lines with --json; a bar only when stderr is a terminal. */
export function progressMode(json: boolean, stderrIsTty: boolean): ProgressMode {
  if (json) return 'json';
  return stderrIsTty ? 'bar' : 'lines';
}

function outcomeText(row: TargetRow): string {
  const why = [row.reason, row.detail].filter((part) => part !== null).join('/');
  return why === '' ? row.outcome : `${row.outcome} (${why})`;
}

function tallyText(tally: ReadonlyMap<string, number>): string {
  return tally.size === 0 ? '-' : [...tally].map(([outcome, n]) => `${outcome} ${n}`).join(', ');
}

function jsonLine(event: RolloutProgress): string {
  switch (event.kind) {
    case 'started':
      return JSON.stringify({
        progress: 'rollout_started',
        rollout_id: event.rolloutId,
        run_id: event.runId,
        resumed_from: event.resumedFrom,
        dry_run: event.dryRun,
        targets: event.targetCount,
        stages: event.stageCount,
      });
    case 'stage_started':
      return JSON.stringify({ progress: 'rollout_stage_started', stage_id: event.stageId, targets: event.targets, settled_before: event.settledBefore });
    case 'target':
      return JSON.stringify({ progress: 'rollout_target', stage_id: event.stageId, ...event.row });
    case 'stage_finished':
      return JSON.stringify({ progress: 'rollout_stage_finished', stage_id: event.stageId, status: event.status });
    case 'finished':
      return JSON.stringify({ progress: 'rollout_finished', status: event.status });
  }
}

/** Plain lines for a log: what happened, in order, with a running count. */
function linesSink(write: (text: string) => void): ProgressSink {
  let total = 0;
  let settled = 0;
  let stages = 0;
  return {
    stop: () => undefined,
    onProgress: (event) => {
      switch (event.kind) {
        case 'started':
          total = event.targetCount;
          stages = event.stageCount;
          write(
            `rollout: ${event.resumedFrom === null ? 'started' : `resumed from ${event.resumedFrom} as`} run ${event.runId}` +
              ` (rollout ${event.rolloutId})${event.dryRun ? ', dry run' : ''}: ${total} target(s) in ${stages} batch(es)\n`,
          );
          return;
        case 'stage_started':
          settled = event.settledBefore;
          write(`rollout: ${event.stageId} of ${stages}: ${event.targets} target(s), ${settled}/${total} settled before it\n`);
          return;
        case 'target':
          settled += 1;
          write(`rollout: [${settled}/${total}] ${event.row.minion_id} ${outcomeText(event.row)}\n`);
          return;
        case 'stage_finished':
          write(`rollout: ${event.stageId} ${event.status}\n`);
          return;
        case 'finished':
          write(`rollout: ${event.status}\n`);
      }
    },
  };
}

/** The live bar: one line redrawn in place, its last frame kept when it stops. */
function barSink(stream: NodeJS.WritableStream): ProgressSink {
  const bar = new cliProgress.SingleBar(
    {
      stream,
      format: 'rollout |{bar}| {value}/{total} targets | {stage} | {tally}',
      barsize: 30,
      hideCursor: false,
      clearOnComplete: false,
      stopOnComplete: false,
      etaBuffer: 50,
      fps: 10,
      noTTYOutput: false,
    },
    cliProgress.Presets.shades_classic,
  );
  const tally = new Map<string, number>();
  let stages = 0;
  let running = false;
  const stop = (): void => {
    if (!running) return;
    running = false;
    bar.stop();
  };
  return {
    stop,
    onProgress: (event) => {
      switch (event.kind) {
        case 'started':
          stages = event.stageCount;
          running = true;
          bar.start(event.targetCount, 0, { stage: `batch 0/${stages}`, tally: '-' });
          return;
        case 'stage_started':
          bar.update(Math.max(event.settledBefore, 0), { stage: `batch ${event.index + 1}/${stages}` });
          return;
        case 'target':
          tally.set(event.row.outcome, (tally.get(event.row.outcome) ?? 0) + 1);
          bar.increment(1, { tally: tallyText(tally) });
          return;
        case 'stage_finished':
          if (event.status === 'failed') bar.update({ stage: `${event.stageId} failed` });
          return;
        case 'finished':
          bar.update({ stage: event.status });
          stop();
      }
    },
  };
}

export function progressSink(mode: ProgressMode, write: (text: string) => void, terminal: NodeJS.WritableStream): ProgressSink {
  switch (mode) {
    case 'json':
      return { stop: () => undefined, onProgress: (event) => write(`${jsonLine(event)}\n`) };
    case 'lines':
      return linesSink(write);
    case 'bar':
      return barSink(terminal);
  }
}
