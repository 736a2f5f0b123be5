package executor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

// The loop commits offsets at most once per OffsetCommitInterval, so the
// jobs of the polls in between are committed later; with no record left to
// wake it, the member still commits them, while it runs, not only at stop.
// Announcing without waiting (AsyncAnnounce), the last acknowledgement is
// what wakes it.
func TestOffsetsCommittedWhileIdle(t *testing.T) {
	t.Parallel()
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async announce %v", async), func(t *testing.T) {
			t.Parallel()
			testOffsetsCommittedWhileIdle(t, async)
		})
	}
}

func testOffsetsCommittedWhileIdle(t *testing.T, async bool) {
	b := setup(t, 2)
	cfg := b.config()
	cfg.OffsetCommitInterval = 2 * time.Second
	cfg.AsyncAnnounce = async
	b.start(cfg)

	first := []*record.Job{createJob(docName(1), jsondoc.DocumentType), createJob(docName(2), jsondoc.DocumentType)}
	b.submit(first...)
	b.waitResults(ids(first), 30*time.Second)
	// Within the interval of the first commit: these wait for the next.
	second := []*record.Job{patchJob(docName(1), 1), patchJob(docName(2), 1), patchJob(docName(1), 2)}
	b.submit(second...)
	b.waitResults(ids(second), 30*time.Second)

	adm := b.kenv.Admin()
	ends, err := adm.ListEndOffsets(context.Background(), b.kenv.Names.Jobs)
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "every partition committed to its end while the member idles", func() bool {
		committed, err := adm.FetchOffsets(context.Background(), b.kenv.Group("executor"))
		if err != nil {
			return false
		}
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			if c, ok := committed.Lookup(b.kenv.Names.Jobs, o.Partition); o.Offset > 0 && (!ok || c.At != o.Offset) {
				done = false
			}
		})
		return done
	})
}
