// Package model is doclog's document-model SDK: what a document type is
// (Model: versions, initial state per scope, declared actions with input
// validation, reducers), the Registry of types and their upgrade paths, the
// system reducer of the document scope (create, upgrade, delete,
// relationships, name and slug), the canonical state hash (RFC 8785 JSON,
// SHA-256, base64), the derived identities of operations and jobs, Apply
// and Replay, which turn actions into operations and prove a stream's stored
// hashes, and the one rule for keyframes: when one is due (KeyframeDue) and
// how a state at a revision is rebuilt from the nearest one (StateAt).
//
// It is public because users write their own models against it, and it is
// shared by every stage: the executor applies actions with it, projectors and
// the read store recompute and verify state with it, the admin CLI validates
// documents with it. It imports nothing of doclog but the log's types.
//
// State is a JSON tree (map[string]any, []any, string, float64, bool, nil),
// the form the hash is defined on, so a state needs no conversion to be
// hashed, stored as a keyframe or sent to a projector. Numbers are IEEE
// doubles, as in RFC 8785: integers are exact up to 2^53.
//
// Performance contract: reducers mutate the state they are given. A caller
// that needs to keep the state before an action clones it (StreamState.Clone)
// or takes a savepoint on it (StreamState.Savepoint); the executor clones a
// head once per run of a document's jobs, and takes a savepoint per later
// job, never per action.
//
// Incremental hashing: a StreamState keeps the canonical bytes of its State
// and an index of them (each object of a kilobyte or more: its members in
// RFC 8785 order and where each begins). An action whose ActionSpec declares
// the paths it touches (Touches; doclog/json's actions do) is applied
// copy-on-write: Apply copies the objects on those paths, the reducer changes
// only the copies, and the new canonical bytes are the old ones with the
// touched members re-encoded and the runs between them copied; SHA-256
// resumes from a saved digest state (every 16 KB) before the first changed
// byte. Such a state is persistent, never changed in place where it may be
// shared, so Clone shares it; the copies Apply made since the last Clone
// are the state's own, and later actions on the same paths change them in
// place, so a replay or a job's actions copy an object of a path once, not
// once per operation. The hash stays the contract's, SHA-256 of the whole canonical JSON,
// and what a change costs is its path's encoding plus copying and digesting
// the bytes after it. An undeclared action copies, reduces and encodes the
// whole state, as before.
package model
