// Package config binds doclog's command-line flags to DOCLOG_* environment
// variables, so every setting can come from either: a flag given on the
// command line wins, then the variable, then the flag's documented default.
package config

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// EnvPrefix starts every variable name.
const EnvPrefix = "DOCLOG_"

// EnvName is the variable that sets a flag: --kafka-seeds is
// DOCLOG_KAFKA_SEEDS.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// ApplyEnv sets every flag that was not given on the command line from its
// environment variable, if set. lookup is os.LookupEnv outside tests.
func ApplyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var errs []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		name := EnvName(f.Name)
		v, ok := lookup(name)
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q: %v", name, v, err))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("invalid environment: %s", strings.Join(errs, "; "))
	}
	return nil
}

// AnnotateUsage appends the variable name to each flag's usage, so --help
// documents both spellings.
func AnnotateUsage(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		suffix := " (env " + EnvName(f.Name) + ")"
		if !strings.HasSuffix(f.Usage, suffix) {
			f.Usage += suffix
		}
	})
}
