package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Balances is the state-side check of "applied once": a document's balance,
// as the read store serves it, is the sum of its succeeded deposits. A
// deposit applied twice, or acknowledged as done and missing from the state,
// moves it.
type Balances struct {
	Checked int
	Off     []string // document: want, got
	Exact   bool     // false when some submits were abandoned: those may have been applied, so only a floor holds
}

// CheckBalances reads every created document's balance from the read store.
func CheckBalances(ctx context.Context, readstoreURL string, outcomes []Outcome, exact bool) Balances {
	want := map[string]int64{}
	for _, o := range outcomes {
		succeeded := o.Status == "WRITE_READY" || o.Status == "READ_READY"
		switch {
		case o.Kind == KindCreate && succeeded:
			want[o.DocID] += 0
		case o.Kind == KindDeposit && succeeded:
			want[o.DocID] += o.Amount
		}
	}
	docs := make([]string, 0, len(want))
	for doc := range want {
		docs = append(docs, doc)
	}
	res := Balances{Exact: exact, Checked: len(docs)}
	client := &http.Client{Timeout: 10 * time.Second}
	var mu sync.Mutex
	parallel(16, len(docs), func(i int) {
		doc := docs[i]
		got, err := balance(ctx, client, readstoreURL, doc)
		mu.Lock()
		defer mu.Unlock()
		switch w := want[doc]; {
		case err != nil:
			res.Off = append(res.Off, fmt.Sprintf("%s: %v", doc, err))
		case got < w || (exact && got != w):
			res.Off = append(res.Off, fmt.Sprintf("%s: balance %d, the succeeded deposits sum to %d", doc, got, w))
		}
	})
	return res
}

func balance(ctx context.Context, client *http.Client, base, doc string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/documents/"+doc+"?scope=global", nil)
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
	acct, ok := d.Scopes["global"].State.Accounts["a"]
	if !ok {
		return 0, fmt.Errorf("the document has no account a")
	}
	return acct.Balance, nil
}
