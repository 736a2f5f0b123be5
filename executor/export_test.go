package executor

// SetAfterAppend sets the hook that runs after each successful
// Store.Append and before anything is produced; a non-nil error stops the
// member as a crash would (see Config.afterAppend).
func (c *Config) SetAfterAppend(f func() error) { c.afterAppend = f }
