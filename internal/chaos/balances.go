package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	oplog "github.com/doclog/doclog/log"
)

// Balances is the state-side check of "applied once": a document's balance,
// as the read store serves it, is the sum of its succeeded deposits. A
// deposit applied twice, or acknowledged as done and missing from the state,
// moves it. The sync documents' branches are read too, each held to what a
// replay of its succeeded jobs gives (syncBalances): the distinct
// operations a replica's loads carried, a branch's deposits and what
// promotes brought onto it.
type Balances struct {
	Checked int      // documents' branches read back
	Sync    int      // of them, the sync documents'
	Off     []string // document: want, got
	Exact   bool     // false when some submits were abandoned: those may have been applied, so only a floor holds
}

// CheckBalances reads every created document's balance from the read store.
func CheckBalances(ctx context.Context, readstoreURL string, outcomes []Outcome, exact bool) Balances {
	want := syncBalances(outcomes)
	res := Balances{Exact: exact, Sync: len(want)}
	for _, o := range outcomes {
		main := docBranch{o.DocID, oplog.DefaultBranch}
		switch {
		case o.Kind == KindCreate && o.succeeded():
			want[main] += 0
		case o.Kind == KindDeposit && o.succeeded():
			want[main] += o.Amount
		}
	}
	docs := make([]docBranch, 0, len(want))
	for doc := range want {
		docs = append(docs, doc)
	}
	res.Checked = len(docs)
	client := &http.Client{Timeout: 10 * time.Second}
	var mu sync.Mutex
	parallel(16, len(docs), func(i int) {
		doc := docs[i]
		got, err := balance(ctx, client, readstoreURL, doc.doc, doc.branch)
		mu.Lock()
		defer mu.Unlock()
		switch w := want[doc]; {
		case err != nil:
			res.Off = append(res.Off, fmt.Sprintf("%s on %s: %v", doc.doc, doc.branch, err))
		case got < w || (exact && got != w):
			res.Off = append(res.Off, fmt.Sprintf("%s on %s: balance %d, a replay of its succeeded jobs gives %d", doc.doc, doc.branch, got, w))
		}
	})
	return res
}

func balance(ctx context.Context, client *http.Client, base, doc, branch string) (int64, error) {
	q := url.Values{"scope": {oplog.ScopeGlobal}, "branch": {branch}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/documents/"+url.PathEscape(doc)+"?"+q.Encode(), nil)
	if err != nil {
		return 0, fmt.Errorf("building a document read: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading the document: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("reading the document: %s", resp.Status)
	}
	var d struct {
		Scopes map[string]struct {
			State struct {
				Accounts map[string]struct {
					Balance int64 `json:"balance"`
				} `json:"accounts"`
			} `json:"state"`
		} `json:"scopes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return 0, fmt.Errorf("decoding the document: %w", err)
	}
	acct, ok := d.Scopes[oplog.ScopeGlobal].State.Accounts[ledgerAccount]
	if !ok {
		return 0, fmt.Errorf("the document has no account a")
	}
	return acct.Balance, nil
}
