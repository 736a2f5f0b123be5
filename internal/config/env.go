// Package config binds doclog's command-line flags to DOCLOG_* environment
// variables, so every setting can come from either: a flag given on the
// command line wins, then the variable, then the flag's documented default.
// A flag marked secret can also be read from a file named by
// DOCLOG_<FLAG>_FILE, which keeps the secret out of the process's
// arguments and environment.
package config

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// EnvPrefix starts every variable name.
const EnvPrefix = "DOCLOG_"

// FileSuffix ends the name of the variable that names a secret's file.
const FileSuffix = "_FILE"

// secretAnnotation marks a flag whose value is a secret; fromEnvAnnotation
// one that ApplyEnv set, which a second ApplyEnv leaves alone (pflag counts
// it as given, like one from the command line).
const (
	secretAnnotation  = "doclog.io/secret"
	fromEnvAnnotation = "doclog.io/from-env"
)

// EnvName is the variable that sets a flag: --kafka-seeds is
// DOCLOG_KAFKA_SEEDS.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// FileEnvName is the variable that names the file a secret flag is read
// from: --database-url is DOCLOG_DATABASE_URL_FILE.
func FileEnvName(flag string) string { return EnvName(flag) + FileSuffix }

// MarkSecret marks flags of fs as secrets: ApplyEnv also reads each from
// the file FileEnvName names, and never quotes its value in an error. It
// panics on a name fs does not have, which is a mistake in the code.
func MarkSecret(fs *pflag.FlagSet, names ...string) {
	for _, name := range names {
		if err := fs.SetAnnotation(name, secretAnnotation, []string{"true"}); err != nil {
			panic(fmt.Sprintf("config: marking --%s secret: %v", name, err))
		}
	}
}

// IsSecret reports whether MarkSecret marked f.
func IsSecret(f *pflag.Flag) bool {
	_, ok := f.Annotations[secretAnnotation]
	return ok
}

// ApplyEnv sets every flag that was not given on the command line from its
// environment variable, if set, and every secret flag from the file its
// _FILE variable names. A secret given twice (the flag or the variable,
// and the file) is an error rather than a silent choice, since the two
// would differ only by mistake. Applying twice is harmless. lookup is
// os.LookupEnv outside tests.
func ApplyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if _, done := f.Annotations[fromEnvAnnotation]; done {
			return
		}
		name := EnvName(f.Name)
		v, ok := lookup(name)
		if IsSecret(f) {
			if path, given := lookup(FileEnvName(f.Name)); given {
				// An empty variable beside the file is no second value.
				if err := applyFile(fs, f, ok && v != "", path); err != nil {
					errs = append(errs, err)
					return
				}
				_ = fs.SetAnnotation(f.Name, fromEnvAnnotation, []string{FileEnvName(f.Name)})
				return
			}
		}
		if f.Changed || !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			if IsSecret(f) {
				// pflag's error quotes the value.
				errs = append(errs, fmt.Errorf("%s: not a valid value of --%s", name, f.Name))
			} else {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
			return
		}
		_ = fs.SetAnnotation(f.Name, fromEnvAnnotation, []string{name})
	})
	if len(errs) > 0 {
		return fmt.Errorf("invalid environment: %w", errors.Join(errs...))
	}
	return nil
}

// applyFile sets secret flag f from the file at path. The file's trailing
// line break is not part of the secret (editors and `echo` add one). A
// list flag takes each non-blank line as the variable would take it, so a
// file holds one token per line, and a comma-separated list written for
// the variable also works as a file.
func applyFile(fs *pflag.FlagSet, f *pflag.Flag, envToo bool, path string) error {
	fileVar := FileEnvName(f.Name)
	switch {
	case f.Changed:
		return fmt.Errorf("--%s and %s are both given: give one", f.Name, fileVar)
	case envToo:
		return fmt.Errorf("%s and %s are both set: set one", EnvName(f.Name), fileVar)
	case path == "":
		return fmt.Errorf("%s is set but empty: name the file that holds --%s", fileVar, f.Name)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: reading --%s from %s: %w", fileVar, f.Name, path, err)
	}
	content := strings.TrimRight(string(data), "\r\n")
	if content == "" {
		return fmt.Errorf("%s: %s is empty", fileVar, path)
	}
	values := []string{content}
	if _, list := f.Value.(pflag.SliceValue); list {
		values = values[:0]
		for line := range strings.Lines(content) {
			if line = strings.TrimSpace(line); line != "" {
				values = append(values, line)
			}
		}
	}
	// A list flag's first Set replaces its default and later ones append.
	for _, v := range values {
		if err := fs.Set(f.Name, v); err != nil {
			return fmt.Errorf("%s: %s does not hold a valid value of --%s", fileVar, path, f.Name)
		}
	}
	return nil
}

// AnnotateUsage appends the variable names to each flag's usage, so --help
// documents every spelling.
func AnnotateUsage(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		suffix := " (env " + EnvName(f.Name) + ")"
		if IsSecret(f) {
			suffix = " (env " + EnvName(f.Name) + ", or " + FileEnvName(f.Name) + " naming a file that holds it)"
		}
		if !strings.HasSuffix(f.Usage, suffix) {
			f.Usage += suffix
		}
	})
}
