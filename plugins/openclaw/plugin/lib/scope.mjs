// The scope of a model tool call: the OpenClaw session that makes it.

/**
 * forSession is the flag that scopes a command to the calling session: a
 * conversation reads, answers and stops only the work it started itself.
 */
export function forSession(ctx) {
  if (!ctx.sessionKey) throw new Error("the calling OpenClaw session is not known for this call, so it cannot be checked");
  return ["--for-session", ctx.sessionKey];
}
