package servicecli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/connflags"
)

// devContextFlag names the doclogctl context dev writes its addresses to.
//
// It is not --context, whose variable DOCLOG_CONTEXT chooses doclogctl's
// context: set in a shell for doclogctl, it would make dev overwrite that
// context with its own addresses.
const devContextFlag = "write-context"

// writeDevContext records this instance's addresses as the doclogctl
// context name, in the config file doclogctl reads (--config, DOCLOG_CONFIG,
// else the default), and makes it current when no context is: dev picks
// new ports at each start, and `doclogctl status` should find them with no
// flag. The URL keeps its password, as a kubeconfig keeps its credentials:
// the file is written 0600. It returns the banner's line about it; a file
// that cannot be written is reported there, not fatal, since dev runs
// without it.
func writeDevContext(fs *pflag.FlagSet, name string, s *app.Settings, a *app.App, apiScheme string) string {
	if name == "" {
		return ""
	}
	def, err := config.DefaultFilePath()
	path := config.FilePath(fs, nil, def)
	if path == "" {
		return fmt.Sprintf("doclogctl context %q not written: %v", name, err)
	}
	f, err := config.ReadFile(path, true)
	if err != nil {
		return fmt.Sprintf("doclogctl context %q not written: %v", name, err)
	}
	c := config.NewContext(name)
	c.Set(connflags.DatabaseURL, s.DatabaseURL)
	c.SetList(connflags.KafkaSeeds, s.Kafka.Seeds)
	if s.Topics.Prefix != "" {
		c.Set("topics-prefix", s.Topics.Prefix)
	}
	if s.ClickHouseURL != "" {
		c.Set(connflags.ClickHouseURL, s.ClickHouseURL)
	}
	c.Set("ingest-url", apiScheme+localAddr(a.Addr(app.RoleIngest)))
	if addr := a.Addr(app.RoleReadstore); addr != "" {
		c.Set("readstore-url", apiScheme+localAddr(addr))
	}
	f.SetContext(*c)
	current := ""
	if f.CurrentContext == "" || f.CurrentContext == name {
		f.SetCurrentContext(name)
		current = ", the current one"
	} else {
		current = fmt.Sprintf("; the current one is %q (doclogctl context use %s)", f.CurrentContext, name)
	}
	if err := f.Write(); err != nil {
		return fmt.Sprintf("doclogctl context %q not written: %v", name, err)
	}
	return fmt.Sprintf("doclogctl context %q written to %s%s", name, path, current)
}
