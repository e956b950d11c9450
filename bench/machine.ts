import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg, totalmem } from 'node:os';

export interface MachineInfo {
  cores: number;
  cpuModel: string;
  memoryGiB: number;
  node: string;
  loadAverage: string;
  platform: string;
}

/** What the figures were measured on (`nproc`, `node --version`, the CPU model of /proc/cpuinfo). */
export function machineInfo(): MachineInfo {
  let cpuModel = 'unknown';
  try {
    cpuModel = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? cpuModel;
  } catch {
    // not Linux: keep 'unknown'
  }
  return {
    cores: availableParallelism(),
    cpuModel,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    loadAverage: loadavg()
      .map((value) => value.toFixed(2))
      .join(' '),
    platform: `${process.platform} ${process.arch}`,
  };
}
