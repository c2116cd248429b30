// Package agentsession is the seam through which a ClawConnect task is
// attached to a managed agent session that some other system started.
//
// ClawConnect owns the attachment record, its lineage, freshness and
// normalization; the embedding host owns the runtime. The package provides:
//
//   - the closed state vocabulary ([State]) and the normalized [Status] that
//     every runtime reply ([Observation]) is turned into by [Normalize];
//   - a [Registry] instance (never a global) on which a host registers a
//     [Runtime]: an id, a provider and an inspect callback, with optional
//     continue and detach callbacks, capabilities derived from which exist;
//   - [Registry.Dispatch], which sends exactly one operation to one known
//     session under a wall-clock deadline and never returns an error, and
//     refuses a reply that [CheckObservation] refuses (unsafe identity
//     fields, metadata over [MetadataMaxKeys] or [MetadataMaxBytes]);
//   - [ParseHandoff], the grammar of the <agent-session> marker and the
//     [[clawconnect:agent-session]] directive carried in run_task's context;
//   - the [Book] of attachments per OpenClaw session key (one current record,
//     lineage chained by replacesAttachmentId, records never deleted,
//     compare-and-set observation write-back), persisted through the small
//     [Store] interface, with an in-memory [MemoryStore];
//   - the blocked-delegation notice ([BlockedDelegationFor]) and the tier-3
//     recovery decision ([Book.Recover]).
//
// The package does no I/O of its own besides calling the host's callbacks and
// its Store. It has no runtime built in: a default process registers none,
// and every code path then behaves as if the seam did not exist.
package agentsession
