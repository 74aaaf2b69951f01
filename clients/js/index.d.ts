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

  list(opts?: { state?: string; metadata?: Record<string, string>; limit?: number }): Promise<Array<{ id: string; [k: string]: unknown }>>;
  setTtl(id: string, ttl: number): Promise<unknown>;

  exec(id: string, argv: string[], opts?: ExecOptions): AsyncGenerator<ExecEvent>;
  run(id: string, argv: string[], opts?: ExecOptions): Promise<ExecResult>;
  events(id: string, pid: number): AsyncGenerator<ExecEvent>;
  processes(id: string): Promise<Array<Record<string, unknown>>>;

  readFile(id: string, path: string): Promise<Buffer>;
  writeFile(id: string, path: string, data: string | Uint8Array, opts?: { parents?: boolean }): Promise<{ path: string; size: number }>;
  deleteFile(id: string, path: string, opts?: { recursive?: boolean }): Promise<unknown>;
  listFiles(id: string, path?: string, opts?: { depth?: number }): Promise<{ entries: Array<{ name: string; path?: string; type: string; size: number; [k: string]: unknown }> }>;
  mkdir(id: string, path: string, opts?: { parents?: boolean }): Promise<unknown>;
  rename(id: string, from: string, to: string, opts?: { overwrite?: boolean }): Promise<unknown>;
  stat(id: string, path: string): Promise<{ size: number; type: string; [k: string]: unknown }>;
  exists(id: string, path: string): Promise<boolean>;
  uploadTar(id: string, path: string, tar: Uint8Array): Promise<{ path: string; files: number; dirs: number; bytes: number }>;
  downloadTar(id: string, path?: string): Promise<Buffer>;
  watch(id: string, path?: string, opts?: { recursive?: boolean; timeout?: number }): AsyncGenerator<{ type: string; path?: string; from?: string }>;

  openPort(id: string, port: number, opts?: { hostPort?: number; bind?: string }): Promise<{ port: number; hostPort: number; [k: string]: unknown }>;
  ports(id: string): Promise<Array<Record<string, unknown>>>;
  closePort(id: string, port: number): Promise<unknown>;

  volumes(): Promise<Array<Record<string, unknown>>>;
  createVolume(name: string, size: number | string): Promise<Record<string, unknown>>;
  getVolume(name: string): Promise<Record<string, unknown>>;
  deleteVolume(name: string): Promise<unknown>;

  diff(id: string): Promise<Buffer>;
  accept(id: string, paths?: string[]): Promise<unknown>;
  discard(id: string, paths?: string[]): Promise<unknown>;
  export(id: string): Promise<Buffer>;
  push(id: string, branch: string, opts?: { force?: boolean; openPr?: boolean }): Promise<unknown>;

  audit(id: string): Promise<Array<Record<string, unknown>>>;
  tools(id: string): Promise<Array<{ name: string; description: string; inputSchema: object }>>;
  health(): Promise<{ status: string; [k: string]: unknown }>;
  metrics(): Promise<string>;
}

export interface ExecOptions {
  env?: Record<string, string>;
  cwd?: string;
  stdin?: string | Uint8Array;
  timeout?: number;
  uid?: number;
}

export interface ExecEvent {
  type: "started" | "stdout" | "stderr" | "error" | "exit";
  pid?: number;
  data?: Buffer;
  exitCode?: number;
  signal?: number | null;
  errorCode?: string | null;
  [k: string]: unknown;
}

export interface ExecResult {
  pid: number | null;
  exitCode: number | null;
  signal: number | null;
  errorCode: string | null;
  stdout: Buffer;
  stderr: Buffer;
  events: ExecEvent[];
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

export type ApprovalDecision = "allow-once" | "allow-sandbox" | "deny" | "deny-sandbox";

export interface Approval {
  id: string;
  sandbox: string;
  kind: string;
  [k: string]: unknown;
}

export interface Client {
  capabilities(id: string): Promise<Record<string, unknown>>;
  changeCapabilities(id: string, change?: { grant?: object[]; revoke?: object[] }): Promise<Record<string, unknown>>;
  grantCapabilities(id: string, ...entries: object[]): Promise<Record<string, unknown>>;
  revokeCapabilities(id: string, ...entries: object[]): Promise<Record<string, unknown>>;
  approvals(sandboxId?: string): Promise<Approval[]>;
  decideApproval(approvalId: string, decision: ApprovalDecision): Promise<Record<string, unknown>>;
  estop(id: string): Promise<{ sandbox: string; stopped: boolean; driverTold: boolean; receivedAt: number }>;
}
