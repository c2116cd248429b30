// Package fakemodel is the project's own fake model server: an HTTP server on
// 127.0.0.1 that speaks the three model APIs the real peers use (OpenAI chat
// completions for OpenClaw, OpenAI Responses for Codex, Anthropic Messages for
// Claude Code and OpenClaw's Anthropic provider), streaming SSE or plain JSON
// as the client asks, with replies scripted by trigger words in the prompt and
// every request logged for assertions.
//
// # Endpoints
//
//	POST …/chat/completions        OpenAI chat completions (stream or not)
//	POST …/responses               OpenAI Responses (stream or not)
//	POST …/messages                Anthropic Messages (stream or not; ?beta=true ignored)
//	POST …/messages/count_tokens   Anthropic token count ({"input_tokens": N})
//	GET  …/models                  model list (OpenClaw's model discovery)
//	HEAD any path                  200 (Claude Code's connectivity probe)
//
// Paths match by suffix, so both "/v1/chat/completions" and
// "/chat/completions" work: point OpenAI clients at [Server.OpenAIBaseURL]
// (ends in /v1) and Anthropic clients at [Server.AnthropicBaseURL] (no /v1).
//
// # The prompt
//
// The prompt is the newest user text in the request, cleaned the way the real
// clients need: OpenClaw's internal-context messages
// ("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"), Claude Code's <system-reminder>
// blocks and Codex's <environment_context> items are skipped, and OpenClaw's
// "[timestamp] " prefix and "\n\nRuntime: …" suffix are removed. Triggers are
// looked for in that prompt only, never in system prompts.
//
// # Trigger words
//
// Triggers are upper-case words anywhere in the prompt. Without any, the
// reply is DefaultPrefix + prompt ("FAKE-REPLY: hello").
//
//	ECHO=<token>      reply exactly <token> (a run of non-space characters),
//	                  so a test can assert the final text byte for byte
//	LONG              a long reply: LongText(DefaultLongLines)
//	LONG=<n>          LongText(n), n lines (at most MaxLongLines)
//	EMPTY             an empty reply (the stream still completes normally)
//	SLOW              stream the reply in Options.SlowChunks chunks, one every
//	                  Options.SlowChunkDelay (default 40 × 250 ms): abort tests
//	WAIT=<ms>         wait <ms> milliseconds before answering at all
//	WAITONCE=<ms>     WAIT=<ms> for the first request with this prompt only;
//	                  a repeat (a run redone after a restart) is answered at once
//	HANG              send the response head and the first chunk, then hold
//	                  the stream open until the client goes away or the
//	                  server closes (deterministic abort tests)
//	FAIL400           answer HTTP 400 invalid_request_error (OpenClaw fails
//	                  the run at once)
//	FAIL500           answer HTTP 500 (OpenClaw retries for minutes: avoid)
//	FAIL=<status>     answer that HTTP status (400–599)
//	TOOLCALL: <cmd>   ask the client to run the shell command <cmd> (rest of
//	                  the line) with its shell tool: "exec" for OpenClaw,
//	                  "Bash" for Claude Code, "exec_command" for Codex
//	                  (each verified end to end: the command runs and its
//	                  output comes back to the model)
//	TOOLCALL: ESCALATE <cmd>
//	                  the same, asking to run outside the sandbox: Codex
//	                  (default on-request policy) shows its approval prompt;
//	                  Claude Code asks before any Bash call in its default
//	                  permission mode, so a plain TOOLCALL is enough there
//	QUESTION: <text> | <option> | <option>…
//	                  ask the user the single-choice question <text> with
//	                  the client's own question tool: AskUserQuestion for
//	                  Claude Code, request_user_input for Codex (which
//	                  offers it outside Plan mode only with the feature
//	                  default_mode_request_user_input enabled); fewer than
//	                  two options: DefaultQuestionOptions. The answer comes
//	                  back as a tool result, so the reply shows the choice
//	QUESTION: <text> | <option>… || <text> | <option>…
//	                  several questions in one call of the tool (Codex
//	                  ids from QuestionID)
//	TOOLUSE: <name> <json>
//	                  ask the client to call the tool <name> (any tool it
//	                  declared, e.g. a plugin's) with the JSON object <json>
//	                  (rest of the line) as its arguments
//
// When the newest input is a tool result, the reply is
// ToolResultPrefix + the tool's output (first line, trimmed), and no
// triggers are applied, so a TOOLCALL prompt yields exactly one tool call.
// Codex's thread-title request (a json_schema text format) gets a JSON object
// whose string properties are "Fake title".
//
// # Use
//
// Non-test code calls [Start] with [Options] and [Server.Close]s it; tests
// use [New], which closes the server when the test ends. [Server.Requests]
// and [Server.WaitRequest] expose the request log.
package fakemodel
