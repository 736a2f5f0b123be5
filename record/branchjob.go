package record

import (
	"maps"
	"slices"
	"strconv"

	oplog "github.com/doclog/doclog/log"
)

// Branch jobs change a document's branches rather than its state. They ride
// the jobs topic keyed by document like every job, so they serialize with
// the document's other jobs, and the executor commits them with the same
// conditional append: a fork's copied prefix and a promote's re-appended
// operations are announced as ordinary write-ready records.
const (
	// KindFork creates branch Fork.Branch of the document from the job's
	// branch, sharing its first Fork.At operations per scope (the tips
	// when At is empty).
	KindFork Kind = "fork"
	// KindPromote makes Promote.Onto equal the job's branch, if Onto's
	// tip is still Promote.ExpectedTip; otherwise the job fails as
	// BRANCH_CONFLICT and writes nothing.
	KindPromote Kind = "promote"
	// KindDeleteBranch deletes the job's branch (never main).
	KindDeleteBranch Kind = "delete-branch"
)

// IsBranchKind reports whether k is one of the branch jobs' kinds.
func (k Kind) IsBranchKind() bool {
	return k == KindFork || k == KindPromote || k == KindDeleteBranch
}

// Fork is what a fork job creates.
type Fork struct {
	// Branch is the new branch's name. Naming the source (or any branch
	// the document has had) fails the job as BranchExists.
	Branch string `json:"branch"`
	// At is the fork point: per scope, how many of the source branch's
	// operations the new branch starts with. A scope left out starts at
	// its tip; nil forks at every tip.
	At map[string]int64 `json:"at,omitempty"`
}

// Promote is what a promote job rewrites.
type Promote struct {
	// Onto is the branch made equal to the job's branch; the job's branch
	// itself fails the job as InvalidPromote.
	Onto string `json:"onto"`
	// ExpectedTip is Onto's tip the producer saw: its revision per
	// non-empty scope (a scope left out is expected empty). Required: a
	// promote is always a compare-and-set.
	ExpectedTip map[string]int64 `json:"expectedTip"`
}

// validateBranch checks what the branch kinds ask of a job, and that the
// other kinds carry none of it.
func (j *Job) validateBranch(bad func(field string, t ErrorType, format string, args ...any) error) error {
	if !j.Kind.IsBranchKind() {
		switch {
		case j.Fork != nil:
			return bad("fork", ErrDecode, "only a fork job has one")
		case j.Promote != nil:
			return bad("promote", ErrDecode, "only a promote job has one")
		}
		return nil
	}
	if len(j.Actions) > 0 {
		return bad("actions", ErrInvalidAction, "a %s job has no actions", j.Kind)
	}
	if j.Kind != KindFork && j.Fork != nil {
		return bad("fork", ErrDecode, "only a fork job has one")
	}
	if j.Kind != KindPromote && j.Promote != nil {
		return bad("promote", ErrDecode, "only a promote job has one")
	}
	// A point's scope is any string: one the document does not have
	// fails the job (a fork point past the tip, a tip that does not
	// match), which is the executor's call, not the contract's.
	points := func(field string, m map[string]int64) error {
		for _, s := range slices.Sorted(maps.Keys(m)) {
			if m[s] < 0 {
				return bad(field+"."+strconv.Quote(s), ErrDecode, "negative (%d)", m[s])
			}
		}
		return nil
	}
	switch j.Kind {
	case KindFork:
		if j.Fork == nil {
			return bad("fork", ErrDecode, "missing: a fork job names its new branch")
		}
		if err := checkName(j.Fork.Branch); err != "" {
			return bad("fork.branch", ErrDecode, "%s", err)
		}
		return points("fork.at", j.Fork.At)
	case KindPromote:
		if j.Promote == nil {
			return bad("promote", ErrDecode, "missing: a promote job names the branch it promotes onto")
		}
		if err := checkName(j.Promote.Onto); err != "" {
			return bad("promote.onto", ErrDecode, "%s", err)
		}
		if j.Promote.ExpectedTip == nil {
			return bad("promote.expectedTip", ErrDecode, "missing: a promote states the tip it expects ({} for an empty branch)")
		}
		return points("promote.expectedTip", j.Promote.ExpectedTip)
	default:
		if j.BranchOrDefault() == oplog.DefaultBranch {
			return bad("branch", ErrDecode, "main cannot be deleted")
		}
	}
	return nil
}

// appendBranchJSON appends a branch job's fork or promote object.
func (j *Job) appendBranchJSON(b []byte) []byte {
	if f := j.Fork; f != nil {
		b = appendStringField(append(appendKey(b, "fork", false), '{'), "branch", f.Branch, true)
		if len(f.At) > 0 {
			b = appendPoints(appendKey(b, "at", false), f.At)
		}
		b = append(b, '}')
	}
	if p := j.Promote; p != nil {
		b = appendStringField(append(appendKey(b, "promote", false), '{'), "onto", p.Onto, true)
		b = appendPoints(appendKey(b, "expectedTip", false), p.ExpectedTip)
		b = append(b, '}')
	}
	return b
}

// appendPoints appends a scope → revision object, scopes sorted so the
// encoding is stable.
func appendPoints(b []byte, m map[string]int64) []byte {
	b = append(b, '{')
	for i, s := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		// Scopes are names, which may hold a quote: escape them.
		b = strconv.AppendInt(append(appendString(b, s), ':'), m[s], 10)
	}
	return append(b, '}')
}
