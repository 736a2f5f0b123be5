package postgres

import (
	"github.com/doclog/doclog/internal/pgtx"
	oplog "github.com/doclog/doclog/log"
)

// markUnavailable turns *errp into *oplog.Unavailable when it says the
// database cannot be reached or the connection broke (pgtx.Unreachable), so
// callers classify failures without knowing the driver. Every exported
// method of Store defers it.
func markUnavailable(errp *error) {
	if err := *errp; err != nil && !oplog.IsUnavailable(err) && pgtx.Unreachable(err) {
		*errp = &oplog.Unavailable{Err: err}
	}
}
