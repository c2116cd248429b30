// Package task is the task bridge's job manager: it accepts a task for one
// OpenClaw agent, runs it through a small gateway interface, follows it to
// exactly one outcome (with the reference's recovery tiers), answers the
// read tools (check_task, get_task, list_tasks, get_session, list_sessions)
// from the store, cancels, and rehydrates running tasks after a restart.
//
// Finished tasks live only in the store; the manager keeps in memory only the
// tasks it is actively following.
package task
