// SPDX-License-Identifier: Apache-2.0
// Types for index.js (airlockd's API client, docs/api.md).

export class AirlockError extends Error {
  status: number;
  error: string;
  body: { error?: string; message?: string; [k: string]: unknown };
}

export function defaultSocket(): string | undefined;

export interface ClientOptions {
  socketPath?: string;
  url?: string;
  token?: string;
}

export interface PtySize { rows: number; cols: number }

export interface PtyExit {
  type: "exit";
  pid: number;
  exitCode: number;
  signal: number | null;
  errorCode: string | null;
}

export interface PtyEvents {
  onData?: (data: Uint8Array) => void;
  onExit?: (exit: PtyExit) => void;
  offset?: number;
}

export class PtyHandle {
  readonly pid: number;
  offset: number;
  exit: PtyExit | null;
  closeCode: number | null;
  sendInput(data: string | Uint8Array): Promise<void>;
  wait(): Promise<PtyExit | null>;
  disconnect(): Promise<void>;
}

export interface PtyCreateOptions extends PtyEvents {
  rows?: number;
  cols?: number;
  cmd?: string[];
  envs?: Record<string, string>;
  cwd?: string;
  timeout?: number;
}

export class Pty {
  create(sandboxId: string, opts?: PtyCreateOptions): Promise<PtyHandle | { pid: number }>;
  connect(sandboxId: string, pid: number, ev?: PtyEvents): Promise<PtyHandle>;
  sendInput(sandboxId: string, pid: number, data: string | Uint8Array): Promise<{ ok: boolean }>;
  resize(sandboxId: string, pid: number, size: PtySize): Promise<{ ok: boolean }>;
  kill(sandboxId: string, pid: number): Promise<{ ok: boolean }>;
}

export class Client {
  constructor(opts?: ClientOptions);
  readonly pty: Pty;
  request(method: string, path: string, body?: unknown): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }>;
  create(opts?: { class?: string; policy?: object; metadata?: Record<string, string>; ttl?: number }): Promise<{ id: string; [k: string]: unknown }>;
  get(id: string): Promise<{ id: string; [k: string]: unknown }>;
  delete(id: string): Promise<unknown>;
  execBackground(id: string, argv: string[], opts?: { env?: Record<string, string>; cwd?: string; timeout?: number; pty?: PtySize }): Promise<number>;
  stdin(id: string, pid: number, data: string | Uint8Array): Promise<{ ok: boolean }>;
  signal(id: string, pid: number, sig?: string | number): Promise<{ ok: boolean }>;
}

export interface RunOptions {
  task: string;
  model: string;
  policy: object;
  provider?: "anthropic" | "openai";
  modelRoute?: string;
  maxTurns?: number;
  maxTokens?: number;
  timeout?: number;
  stream?: boolean;
}

export interface Run {
  id: string;
  state: "running" | "done";
  result: { ok: boolean; exitCode: number; errorCode: string | null;
            bundle: { patches: string[]; commitMessages: string[] };
            usage: Record<string, number>; runId: string } | null;
  transcript: object[];
}

export interface Client {
  createRun(opts: RunOptions): Promise<{ id: string; state: string }>;
  getRun(id: string): Promise<Run>;
  waitRun(id: string, timeoutMs?: number): Promise<Run>;
  runEvents(id: string, onEvent: (name: "transcript" | "result", data: any) => void): Promise<object | null>;
}
