package signing

import (
	"context"
	"time"
)

// DefaultWatchInterval is how often WatchKeys reads the key set again.
const DefaultWatchInterval = 10 * time.Second

// WatchKeys reads the key set at path (LoadKeys) every interval until ctx
// ends, and replaces v's keys when they changed, so a key added to a mounted
// Secret is used without a restart (the kubelet updates a Secret volume in
// place, within a minute or so). A read that fails, a file half written
// say, keeps the keys in use: the failure goes to onError and the next read
// tries again. onChange receives the new key ids. Both may be nil.
func (v *Verifier) WatchKeys(ctx context.Context, path string, interval time.Duration, onChange func(ids []string), onError func(error)) {
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		keys, err := LoadKeys(path)
		if err != nil {
			if onError != nil {
				onError(err)
			}
			continue
		}
		if keys.Equal(v.Keys()) {
			continue
		}
		v.SetKeys(keys)
		if onChange != nil {
			onChange(keys.IDs())
		}
	}
}
