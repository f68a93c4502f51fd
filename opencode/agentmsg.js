// agentmsg for OpenCode: peer messages at each prompt, the session id in the agent's shell, and idle
// continuations bounded twice (the delivery envelope's slots, and MAX_CONTINUATIONS here).
//
// It renders nothing itself: every text comes from agentmsg's own hook (`hooks/run opencode`, the same
// Python code Claude Code and Codex run), which fences peer text in the nonce boundary, attributes it and
// caps it in UTF-16 code units (what JavaScript's String length counts).  Any error, timeout or odd
// output from the hook means no text: the session goes on as if agentmsg were not there.  Peer text is
// only ever passed to the model as text; nothing here runs it.  Node built-ins only.
//
// `agentmsg install opencode` writes a copy of this file to ~/.config/opencode/plugins/ with HOOK and CLI
// filled in; from a checkout (HOOK empty) it finds ../hooks/run and ../bin/agentmsg next to itself.
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HOOK = ""; // absolute path of hooks/run (written by `agentmsg install opencode`)
const CLI = ""; // the agentmsg command the hook text names (written by `agentmsg install opencode`)
const MARK = "agentmsg-managed-plugin"; // how `agentmsg install|uninstall|doctor` know this file

const SESSION = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$/; // agentmsg's pin session syntax
const PROMPT_TIMEOUT = 15000; // ms; a slower hook's text is dropped
const STOP_TIMEOUT = 65000; // ms; the Stop hook may wait up to 30 s for a request
const MAX_OUTPUT = 1 << 20; // bytes of hook stdout read at most
const MAX_TEXT = 10000; // UTF-16 units; the hook caps at 8,000 (at most 9,500), so more is a fault
// The plugin's own bound on consecutive idle continuations without a user prompt: the envelope has at most
// 100 slots, and nothing in OpenCode bounds a plugin that keeps prompting.
const MAX_CONTINUATIONS = Math.max(0, Math.min(100, Number(process.env.AGENTMSG_OPENCODE_MAX_CONTINUATIONS ?? 100) || 0));

const here = dirname(fileURLToPath(import.meta.url));
const hookPath = HOOK || join(here, "..", "hooks", "run");
const cliPath = CLI || join(here, "..", "bin", "agentmsg");

function extract(stdout) {
  let doc;
  try {
    doc = JSON.parse(stdout);
  } catch {
    return "";
  }
  if (!doc || typeof doc !== "object") return "";
  const spec = doc.hookSpecificOutput;
  const text = doc.decision === "block" ? doc.reason
    : spec?.permissionDecision === "deny" ? spec.permissionDecisionReason : spec?.additionalContext;
  return typeof text === "string" && text.length <= MAX_TEXT ? text : "";
}

// One run of agentmsg's hook: the JSON on stdin, its text (or "") back; never throws, never hangs.
function runHook(payload, timeout, mode) {
  return new Promise((resolve) => {
    let done = false;
    let size = 0;
    const chunks = [];
    let child;
    let timer;
    const finish = (text) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(text);
    };
    try {
      child = spawn("/bin/sh", mode ? [hookPath, "opencode", mode] : [hookPath, "opencode"], {
        env: { ...process.env, AGENTMSG_CLI: process.env.AGENTMSG_CLI || cliPath },
        stdio: ["pipe", "pipe", "ignore"],
        detached: true,
      });
    } catch {
      resolve("");
      return;
    }
    timer = setTimeout(() => {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        try { child.kill("SIGKILL"); } catch {}
      }
      finish("");
    }, timeout);
    child.on("error", () => finish(""));
    child.stdout.on("data", (b) => {
      size += b.length;
      if (size <= MAX_OUTPUT) chunks.push(b);
    });
    child.on("close", (code) => {
      finish(code === 0 && size <= MAX_OUTPUT ? extract(Buffer.concat(chunks).toString("utf8")) : "");
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

export const AgentmsgPlugin = async ({ client, directory }) => {
  // `opencode run` (without --attach) exits at session.idle: a continuation there would spend an envelope
  // slot and then be lost, so only a long-lived server (serve, the TUI) continues idle sessions.
  const oneShot = process.argv.includes("run") && !process.argv.includes("serve");
  const started = new Set(); // sessions given the SessionStart identity block by this process
  const compacted = new Set(); // sessions whose context OpenCode compacted since their last prompt
  const continuing = new Map(); // session -> the continuation text this plugin sent last
  const streak = new Map(); // session -> continuations since the last user prompt
  const busy = new Set(); // sessions whose idle hook is running

  async function onMessage(input, output) {
    const sid = input?.sessionID;
    const parts = output?.parts;
    if (!SESSION.test(String(sid)) || !Array.isArray(parts) || !output.message?.id) return;
    const prompt = parts.filter((p) => p?.type === "text" && !p.synthetic).map((p) => p.text).join("\n");
    const ours = continuing.has(sid) && continuing.get(sid) === prompt;
    if (!ours) {
      continuing.delete(sid);
      streak.set(sid, 0);
    }
    const texts = [];
    if (!started.has(sid)) {
      started.add(sid);
      // After a compaction the quoted messages are gone from the context: "compact" shows them again.
      const source = compacted.delete(sid) ? "compact" : "startup";
      texts.push(await runHook({ hook_event_name: "SessionStart", session_id: sid, source, cwd: directory }, PROMPT_TIMEOUT));
    }
    if (!ours) {
      texts.push(await runHook({ hook_event_name: "UserPromptSubmit", session_id: sid, prompt, cwd: directory }, PROMPT_TIMEOUT));
    }
    const last = parts.length ? String(parts[parts.length - 1].id || "") : "";
    texts.filter(Boolean).forEach((text, i) => {
      // An id just after the prompt's last part keeps the parts in order (OpenCode sorts by id).
      const id = last ? `${last}am${i}` : undefined;
      parts.push({ ...(id ? { id } : {}), sessionID: sid, messageID: output.message.id, type: "text", synthetic: true, text });
    });
  }

  async function onIdle(sid) {
    if (oneShot || !SESSION.test(String(sid)) || busy.has(sid)) return;
    const n = streak.get(sid) || 0;
    if (n >= MAX_CONTINUATIONS) {
      continuing.delete(sid);
      return;
    }
    busy.add(sid);
    try {
      const again = continuing.has(sid);
      const text = await runHook({ hook_event_name: "Stop", session_id: sid, stop_hook_active: again, cwd: directory }, STOP_TIMEOUT);
      if (!text) {
        continuing.delete(sid);
        return;
      }
      streak.set(sid, n + 1);
      continuing.set(sid, text);
      client.session.prompt({ path: { id: sid }, body: { parts: [{ type: "text", text }] } }).catch(() => {});
    } finally {
      busy.delete(sid);
    }
  }

  return {
    "chat.message": async (input, output) => {
      try {
        await onMessage(input, output);
      } catch {}
    },
    // Claims (docs/CLAIMS.md): before a tool runs, agentmsg's pre-tool hook may refuse an edit of a path another
    // participant holds exclusively; throwing here is how OpenCode refuses a tool call, and the model reads the
    // error.  The hook exits at once, with no interpreter, when nothing is claimed; any fault lets the tool run.
    "tool.execute.before": async (input, output) => {
      let reason = "";
      try {
        const sid = input?.sessionID;
        if (!SESSION.test(String(sid))) return;
        reason = await runHook({ hook_event_name: "PreToolUse", session_id: sid, cwd: directory,
          tool_name: String(input?.tool || ""), tool_input: output?.args ?? {} }, PROMPT_TIMEOUT, "pretool");
      } catch {
        return;
      }
      if (reason) throw new Error(reason);
    },
    "shell.env": async (input, output) => {
      try {
        if (SESSION.test(String(input?.sessionID)) && output?.env) output.env.OPENCODE_SESSION_ID = input.sessionID;
      } catch {}
    },
    event: async ({ event }) => {
      try {
        const sid = event?.properties?.sessionID;
        if (event?.type === "session.idle") await onIdle(sid);
        if (event?.type === "session.compacted" && SESSION.test(String(sid))) {
          started.delete(sid);
          compacted.add(sid);
        }
      } catch {}
    },
  };
};
