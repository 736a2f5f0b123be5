package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/pgproj"
)

// FindingKind classifies what Verify found.
type FindingKind string

const (
	// FindingGap: a stream's indexes are not contiguous from 0.
	FindingGap FindingKind = "gap"
	// FindingHash: replay does not reproduce a stored hash, or an
	// operation does not replay.
	FindingHash FindingKind = "hash"
	// FindingKeyframe: a keyframe disagrees with the replay.
	FindingKeyframe FindingKind = "keyframe"
	// FindingJob: a job result disagrees with the operations of its job.
	FindingJob FindingKind = "job"
	// FindingDocview: a document-view snapshot differs from the log's head.
	FindingDocview FindingKind = "docview"
	// FindingIndexer: an indexer row differs from the log's head.
	FindingIndexer FindingKind = "indexer"
	// FindingAnalytics: ClickHouse's deduplicated figures of a document
	// differ from the log's.
	FindingAnalytics FindingKind = "analytics"
	// FindingQuarantine: a projector holds a stream in quarantine.
	FindingQuarantine FindingKind = "quarantine"
	// FindingTimestampOrder is a note, never a finding: action timestamps
	// that run backwards in a stream.
	FindingTimestampOrder FindingKind = "timestamp-order"
	// FindingJobResultMissing is a note: operations whose job has no
	// stored result and were written before the oldest result kept, so
	// retention may have removed it.
	FindingJobResultMissing FindingKind = "job-result-expired"
)

// projection reports whether a finding compares a projection, which lags
// the log and so is checked again while Verify settles.
func (k FindingKind) projection() bool {
	switch k {
	case FindingDocview, FindingIndexer, FindingAnalytics, FindingQuarantine:
		return true
	}
	return false
}

// Finding is one problem (or, in VerifyReport.Notes, one observation).
type Finding struct {
	Kind       FindingKind      `json:"kind"`
	DocumentID string           `json:"documentId,omitempty"`
	Stream     *oplog.StreamKey `json:"stream,omitempty"`
	// Index is the operation concerned, -1 when none is.
	Index     int64  `json:"index"`
	JobID     string `json:"jobId,omitempty"`
	Projector string `json:"projector,omitempty"`
	Message   string `json:"message"`
}

// VerifyConfig says what Verify compares.
type VerifyConfig struct {
	// Store is the operation log; the Postgres projections are read from
	// the same database. Required.
	Store *postgres.Store
	// Registry holds the models to replay with. Required.
	Registry *model.Registry
	// Docview and Indexer compare those projections' tables with the log.
	Docview, Indexer bool
	// Analytics, when set, compares the ClickHouse tables with the log.
	Analytics *analytics.Projector
	// From verifies only documents whose id sorts after it (the Next of an
	// interrupted run). Default "": every document.
	From string
	// PageSize is how many documents are listed at a time. Default 100.
	PageSize int
	// Wait is how long projection findings are checked again, every
	// RetryInterval, until they no longer hold: a projection that merely
	// lags then settles and only lasting differences are reported.
	// Default 0: one comparison.
	Wait          time.Duration
	RetryInterval time.Duration // default 1s
	// Progress, when set, is called after each document and each phase.
	Progress func(VerifyProgress)
}

// VerifyProgress is how far a verification got.
type VerifyProgress struct {
	Phase      string `json:"phase"`
	Documents  int    `json:"documents"`
	Operations int64  `json:"operations"`
	Findings   int    `json:"findings"`
	// Cursor is the last document verified: --from resumes after it.
	Cursor string `json:"cursor"`
}

// VerifyReport is the outcome of Verify. Clean is true when it is complete
// and found nothing.
type VerifyReport struct {
	From     string `json:"from"`
	Complete bool   `json:"complete"`
	// Next is where an incomplete run stopped: verify again with it as
	// From to go on. "" when complete.
	Next       string   `json:"next,omitempty"`
	Clean      bool     `json:"clean"`
	Checked    []string `json:"checked"`
	Documents  int      `json:"documents"`
	Streams    int      `json:"streams"`
	Operations int64    `json:"operations"`
	Jobs       int      `json:"jobs"`
	// Attempts counts the comparisons of the projections (1 without Wait).
	Attempts int       `json:"attempts"`
	Findings []Finding `json:"findings"`
	Notes    []Finding `json:"notes"`
}

// Verify walks the whole log in document id order and reports every place
// where it contradicts itself or a projection: stream gaps, hashes replay
// does not reproduce, keyframes, job results against their operations, the
// document view, the indexer, the analytics tables (each when configured)
// and quarantined streams. It reads only. An error is returned for failures
// to read; when ctx ends first the report is returned incomplete, with Next
// to resume from, and no error.
func Verify(ctx context.Context, cfg VerifyConfig) (*VerifyReport, error) {
	v, err := newVerifier(cfg)
	if err != nil {
		return nil, err
	}
	return v.run(ctx)
}

// figures are what the analytics tables must hold of a document on a
// branch.
type figures struct {
	operations int64
	deleted    bool
}

type docBranch struct{ id, branch string }

// docResult is everything one document contributed to a report.
type docResult struct {
	findings, notes []Finding
	streams         int
	operations      int64
	figures         map[string]figures // by branch
	jobs            []string
}

type verifier struct {
	cfg       VerifyConfig
	snapshots *ViewSnapshots
	index     *indexer.Index
	projStore *pgproj.Store
	oldestJob time.Time // zero when the jobs table is empty

	rep *VerifyReport
	// docs holds the results with findings or notes, in order of their
	// documents; a clean document leaves only its figures behind.
	docs     map[string]*docResult
	order    []string
	findings int                 // in docs
	walked   bool                // to the end of the log
	seen     map[string]struct{} // jobs whose operations were checked
	figures  map[docBranch]figures
	// findings that are not per document: jobs none of whose operations
	// the walk met, the analytics tables, quarantines.
	unseen, analytics, quarantines []Finding
	unseenChecked                  int
}

func newVerifier(cfg VerifyConfig) (*verifier, error) {
	if cfg.Store == nil || cfg.Registry == nil {
		return nil, errors.New("verifying the log: a store and a registry are required")
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 100
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = time.Second
	}
	pool := cfg.Store.Pool()
	ps := pgproj.New(pool)
	v := &verifier{
		cfg: cfg, projStore: ps,
		rep:     &VerifyReport{From: cfg.From, Checked: []string{"log", "jobs"}, Findings: []Finding{}, Notes: []Finding{}},
		docs:    map[string]*docResult{},
		seen:    map[string]struct{}{},
		figures: map[docBranch]figures{},
	}
	if cfg.Docview {
		v.snapshots = NewViewSnapshots(docview.NewView(pool, ps))
		v.rep.Checked = append(v.rep.Checked, docview.Name)
	}
	if cfg.Indexer {
		v.index = indexer.NewIndex(pool, ps)
		v.rep.Checked = append(v.rep.Checked, indexer.Name)
	}
	if cfg.Analytics != nil {
		v.rep.Checked = append(v.rep.Checked, cfg.Analytics.Name())
	}
	return v, nil
}

func (v *verifier) run(ctx context.Context) (*VerifyReport, error) {
	var err error
	if v.oldestJob, err = v.cfg.Store.OldestJobResult(ctx); err != nil {
		return v.stopped(ctx, err)
	}
	if err := v.walk(ctx); err != nil {
		return v.stopped(ctx, err)
	}
	v.walked = true
	if err := v.checkUnseenJobs(ctx); err != nil {
		return v.stopped(ctx, err)
	}
	if err := v.compareGlobal(ctx); err != nil {
		return v.stopped(ctx, err)
	}
	v.rep.Attempts = 1
	if err := v.settle(ctx); err != nil {
		return v.stopped(ctx, err)
	}
	v.rep.Complete = true
	v.rep.Next = ""
	return v.finish(), nil
}

// stopped turns the end of ctx into an incomplete report; other errors are
// errors.
func (v *verifier) stopped(ctx context.Context, err error) (*VerifyReport, error) {
	if ctx.Err() == nil {
		return nil, err
	}
	if v.rep.Next == "" {
		v.rep.Next = v.cfg.From
	}
	return v.finish(), nil
}

func (v *verifier) progress(phase string) {
	if v.cfg.Progress == nil {
		return
	}
	n := v.findings + len(v.unseen) + len(v.analytics) + len(v.quarantines)
	v.cfg.Progress(VerifyProgress{Phase: phase, Documents: v.rep.Documents, Operations: v.rep.Operations, Findings: n, Cursor: v.rep.Next})
}

// walk verifies every document after From, a page at a time. Next is
// moved only past documents verified in full.
func (v *verifier) walk(ctx context.Context) error {
	cursor := v.cfg.From
	for {
		page, err := v.cfg.Store.ListDocuments(ctx, cursor, v.cfg.PageSize)
		if err != nil {
			return fmt.Errorf("verifying the log: %w", err)
		}
		if len(page.DocumentIDs) == 0 {
			return nil
		}
		heads, err := v.cfg.Store.Heads(ctx, page.DocumentIDs)
		if err != nil {
			return fmt.Errorf("verifying the log: %w", err)
		}
		for _, id := range page.DocumentIDs {
			res, err := v.verifyDocument(ctx, id, branchesOf(heads, id))
			if err != nil {
				return err
			}
			v.record(id, res)
			v.rep.Documents++
			v.rep.Streams += res.streams
			v.rep.Operations += res.operations
			v.rep.Next = id
			v.progress("log")
		}
		if page.Next == "" {
			return nil
		}
		cursor = page.Next
	}
}

// record keeps a document's latest result, replacing an earlier one.
func (v *verifier) record(id string, res *docResult) {
	for branch, f := range res.figures {
		v.figures[docBranch{id, branch}] = f
	}
	for _, j := range res.jobs {
		v.seen[j] = struct{}{}
	}
	if old, ok := v.docs[id]; ok {
		v.findings -= len(old.findings)
		delete(v.docs, id)
	}
	if len(res.findings)+len(res.notes) == 0 {
		return
	}
	if !v.walked { // a document is walked once; settling revisits those in order
		v.order = append(v.order, id)
	}
	v.docs[id] = &docResult{findings: res.findings, notes: res.notes}
	v.findings += len(res.findings)
}

func branchesOf(heads map[oplog.StreamKey]int64, id string) []string {
	var out []string
	for k, rev := range heads {
		if k.DocumentID == id && rev > 0 && !slices.Contains(out, k.Branch) {
			out = append(out, k.Branch)
		}
	}
	slices.Sort(out)
	return out
}

// verifyDocument replays every stream of a document on each branch
// (ValidateDocument's checks, with the document view as its snapshots),
// then checks its jobs and its indexer rows.
func (v *verifier) verifyDocument(ctx context.Context, id string, branches []string) (*docResult, error) {
	res := &docResult{figures: map[string]figures{}}
	var all []oplog.Operation
	var snapshots SnapshotSource
	if v.snapshots != nil {
		v.snapshots.Forget()
		snapshots = v.snapshots
	}
	for _, branch := range branches {
		rep, streams, err := validateDocument(ctx, v.cfg.Store, v.cfg.Registry, snapshots, id, branch)
		if errors.Is(err, ErrDocumentNotFound) {
			continue // gone since it was listed: nothing to compare
		}
		if err != nil {
			return nil, err
		}
		for _, is := range rep.Issues {
			res.findings = append(res.findings, issueFinding(is))
		}
		for _, is := range rep.Notes {
			res.notes = append(res.notes, issueFinding(is))
		}
		f := figures{}
		var doc *model.StreamState
		docScope := false
		for _, s := range streams {
			res.streams++
			res.operations += int64(len(s.Ops))
			f.operations += int64(len(s.Ops))
			all = append(all, s.Ops...)
			if s.Stream.Scope == oplog.ScopeDocument {
				doc, docScope = s.State, true
			}
		}
		if info, ok := model.DocumentInfoOf(doc); ok {
			f.deleted = info.IsDeleted
		}
		res.figures[branch] = f
		// A document scope that does not replay has a finding already and
		// no head to compare the index with.
		if v.index != nil && docScope && doc != nil {
			fs, err := compareIndexer(ctx, v.index, doc)
			if err != nil {
				return nil, err
			}
			res.findings = append(res.findings, fs...)
		}
	}
	fs, notes, jobs, err := v.checkJobsOf(ctx, id, all)
	if err != nil {
		return nil, err
	}
	res.findings = append(res.findings, fs...)
	res.notes = append(res.notes, notes...)
	res.jobs = jobs
	return res, nil
}

func issueFinding(is Issue) Finding {
	kind := FindingKind(is.Kind)
	projector := ""
	switch is.Kind {
	case IssueStreamOrder:
		kind = FindingGap
	case IssueSnapshot:
		kind, projector = FindingDocview, docview.Name
	}
	k := is.Stream
	return Finding{Kind: kind, DocumentID: k.DocumentID, Stream: &k, Index: is.Index, Projector: projector, Message: is.Message}
}

func (v *verifier) finish() *VerifyReport {
	rep := v.rep
	rep.Findings, rep.Notes = []Finding{}, []Finding{}
	for _, id := range v.order {
		if d, ok := v.docs[id]; ok {
			rep.Findings = append(rep.Findings, d.findings...)
			rep.Notes = append(rep.Notes, d.notes...)
		}
	}
	rep.Findings = append(rep.Findings, v.unseen...)
	rep.Findings = append(rep.Findings, v.analytics...)
	rep.Findings = append(rep.Findings, v.quarantines...)
	rep.Jobs = len(v.seen) + v.unseenChecked
	rep.Clean = rep.Complete && len(rep.Findings) == 0
	return rep
}
