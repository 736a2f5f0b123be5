package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// FileFlag names the config file; its variable is DOCLOG_CONFIG.
const FileFlag = "config"

// The keys of a config file that are no flag: doclogctl's contexts.
const (
	keyCurrentContext = "current-context"
	keyContexts       = "contexts"
	keyName           = "name"
)

// File is a config file: a YAML mapping whose keys are flag names, and, for
// doclogctl, named contexts holding the same keys. Settings come from a
// flag, then its variable, then the chosen context, then the file's top
// level, then the default.
type File struct {
	// Path is where the file was read from, or will be written to.
	Path string
	// CurrentContext is the context used when none is named.
	CurrentContext string
	// Contexts are the named sets of settings, in the file's order.
	Contexts []Context

	top  map[string]*yaml.Node // the top level's settings
	keys []string              // their order
	doc  *yaml.Node            // the whole document, kept so a rewrite keeps comments
}

// Context is one named set of settings of a config file.
type Context struct {
	Name string
	// Settings holds each key's value as the file spells it: a scalar, or
	// a list's items joined with commas.
	Settings map[string]string

	lists map[string][]string
	keys  []string
}

// Keys returns the context's keys in the file's order.
func (c Context) Keys() []string { return c.keys }

// Values returns the values of key: one for a scalar, each item of a list.
func (c Context) Values(key string) []string {
	if l, ok := c.lists[key]; ok {
		return l
	}
	if v, ok := c.Settings[key]; ok {
		return []string{v}
	}
	return nil
}

// Context returns the context named name.
func (f *File) Context(name string) (Context, bool) {
	for _, c := range f.Contexts {
		if c.Name == name {
			return c, true
		}
	}
	return Context{}, false
}

// DefaultFilePath is doclog/config.yaml in the user's config directory
// ($XDG_CONFIG_HOME, else ~/.config on Linux): the file doclogctl reads
// when --config and DOCLOG_CONFIG are not given, and where doclog dev
// writes its context.
func DefaultFilePath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("finding the config directory (give --config or DOCLOG_CONFIG): %w", err)
	}
	return filepath.Join(dir, "doclog", "config.yaml"), nil
}

// FilePath is the config file a command reads: --config when given, then
// DOCLOG_CONFIG, then def (empty: none). fs must have the --config flag.
func FilePath(fs *pflag.FlagSet, lookup func(string) (string, bool), def string) string {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	// An empty --config or DOCLOG_CONFIG means the default.
	if f := fs.Lookup(FileFlag); f != nil && f.Changed && f.Value.String() != "" {
		return f.Value.String()
	}
	if v, ok := lookup(EnvName(FileFlag)); ok && v != "" {
		return v
	}
	return def
}

// ReadFile reads the config file at path. A file that does not exist is
// an empty File when missingOK (a default location nobody has written to
// yet), and an error otherwise.
func ReadFile(path string, missingOK bool) (*File, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && missingOK {
		return &File{Path: path, top: map[string]*yaml.Node{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the config file: %w", err)
	}
	f, err := parseFile(data)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	f.Path = path
	return f, nil
}

func parseFile(data []byte) (*File, error) {
	f := &File{top: map[string]*yaml.Node{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	if doc.Kind == 0 { // an empty file
		return f, nil
	}
	f.doc = &doc
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, errors.New("the top level is not a mapping of setting names to values")
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, value := root.Content[i].Value, root.Content[i+1]
		switch key {
		case keyCurrentContext:
			if value.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: %s is not a name", value.Line, key)
			}
			f.CurrentContext = value.Value
		case keyContexts:
			if value.Kind != yaml.SequenceNode {
				return nil, fmt.Errorf("line %d: %s is not a list", value.Line, key)
			}
			for _, item := range value.Content {
				c, err := parseContext(item)
				if err != nil {
					return nil, err
				}
				if _, dup := f.Context(c.Name); dup {
					return nil, fmt.Errorf("line %d: context %q is defined twice", item.Line, c.Name)
				}
				f.Contexts = append(f.Contexts, c)
			}
		default:
			if _, dup := f.top[key]; dup {
				return nil, fmt.Errorf("line %d: %s is given twice", root.Content[i].Line, key)
			}
			f.top[key] = value
			f.keys = append(f.keys, key)
		}
	}
	return f, nil
}

func parseContext(n *yaml.Node) (Context, error) {
	c := Context{Settings: map[string]string{}, lists: map[string][]string{}}
	if n.Kind != yaml.MappingNode {
		return c, fmt.Errorf("line %d: a context is a mapping with a name and settings", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i].Value, n.Content[i+1]
		if key == keyName {
			c.Name = value.Value
			continue
		}
		values, err := nodeValues(key, value)
		if err != nil {
			return c, err
		}
		if _, dup := c.Settings[key]; dup {
			return c, fmt.Errorf("line %d: %s is given twice", n.Content[i].Line, key)
		}
		c.keys = append(c.keys, key)
		c.Settings[key] = strings.Join(values, ",")
		if value.Kind == yaml.SequenceNode {
			c.lists[key] = values
		}
	}
	if c.Name == "" {
		return c, fmt.Errorf("line %d: a context has no name", n.Line)
	}
	return c, nil
}

// nodeValues is a scalar's value, or each item of a list of scalars.
func nodeValues(key string, n *yaml.Node) ([]string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return []string{n.Value}, nil
	case yaml.SequenceNode:
		values := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: %s is a list of values, not of lists or mappings", item.Line, key)
			}
			values = append(values, item.Value)
		}
		return values, nil
	}
	return nil, fmt.Errorf("line %d: %s takes a value or a list of values, not a mapping", n.Line, key)
}

// Apply sets every flag of fs not given yet (on the command line, or by
// ApplyEnv) from the context named context (empty: none), then from the
// file's top level. A key that known does not know (nil: a flag of fs) is
// an error, so a misspelt setting is not silently ignored; known lets a
// key of another subcommand through, which this one does not use. The
// --config flag itself cannot come from a file.
func (f *File) Apply(fs *pflag.FlagSet, context string, known func(string) bool) error {
	if known == nil {
		known = func(name string) bool { return fs.Lookup(name) != nil }
	}
	// A setting set twice takes its first source: the context, then the
	// top level.
	type source struct {
		where  string
		keys   []string
		values func(string) ([]string, error)
	}
	var sets []source
	if context != "" {
		c, ok := f.Context(context)
		if !ok {
			return fmt.Errorf("config file %s has no context %q (its contexts: %s)", f.Path, context, f.contextNames())
		}
		sets = append(sets, source{fmt.Sprintf("context %q", context), c.keys, func(k string) ([]string, error) { return c.Values(k), nil }})
	}
	sets = append(sets, source{"the top level", f.keys, func(k string) ([]string, error) { return nodeValues(k, f.top[k]) }})

	var errs []error
	set := map[string]bool{}
	for _, s := range sets {
		for _, key := range s.keys {
			if key == FileFlag || !known(key) {
				errs = append(errs, fmt.Errorf("%s: unknown setting %q: the keys are flag names without the dashes in front, such as kafka-seeds", s.where, key))
				continue
			}
			fl := fs.Lookup(key)
			if fl == nil || fl.Changed || set[key] {
				continue
			}
			values, err := s.values(key)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if len(values) > 1 {
				if _, list := fl.Value.(pflag.SliceValue); !list {
					errs = append(errs, fmt.Errorf("%s: %s takes one value, not a list", s.where, key))
					continue
				}
			}
			// A list flag's first Set replaces its default and later ones append.
			for _, v := range values {
				if err := fs.Set(key, v); err != nil {
					if IsSecret(fl) {
						// pflag's error quotes the value.
						errs = append(errs, fmt.Errorf("%s: not a valid value of --%s", s.where, key))
					} else {
						errs = append(errs, fmt.Errorf("%s: %s: %w", s.where, key, err))
					}
					break
				}
			}
			set[key] = true
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("config file %s: %w", f.Path, errors.Join(errs...))
	}
	return nil
}

func (f *File) contextNames() string {
	if len(f.Contexts) == 0 {
		return "none"
	}
	names := make([]string, len(f.Contexts))
	for i, c := range f.Contexts {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// SetContext adds the context c, or replaces the settings of the context
// of its name, keeping the rest of the file (comments included).
func (f *File) SetContext(c Context) {
	item := &yaml.Node{Kind: yaml.MappingNode}
	item.Content = append(item.Content, scalar(keyName), scalar(c.Name))
	for _, k := range c.keys {
		item.Content = append(item.Content, scalar(k))
		if l, ok := c.lists[k]; ok {
			seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, v := range l {
				seq.Content = append(seq.Content, scalar(v))
			}
			item.Content = append(item.Content, seq)
		} else {
			item.Content = append(item.Content, scalar(c.Settings[k]))
		}
	}
	contexts := f.value(keyContexts, &yaml.Node{Kind: yaml.SequenceNode})
	replaced := false
	for i, n := range contexts.Content {
		if nameOf(n) == c.Name {
			contexts.Content[i], replaced = item, true
		}
	}
	if !replaced {
		contexts.Content = append(contexts.Content, item)
	}
	i := slices.IndexFunc(f.Contexts, func(x Context) bool { return x.Name == c.Name })
	if i < 0 {
		f.Contexts = append(f.Contexts, c)
	} else {
		f.Contexts[i] = c
	}
}

// SetCurrentContext makes name the current context.
func (f *File) SetCurrentContext(name string) {
	n := f.value(keyCurrentContext, scalar(""))
	n.Value, n.Tag, n.Style = name, "!!str", 0
	f.CurrentContext = name
}

// value returns the node of the top-level key, adding it as def when absent.
func (f *File) value(key string, def *yaml.Node) *yaml.Node {
	if f.doc == nil {
		f.doc = &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := f.doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == key {
			return root.Content[i+1]
		}
	}
	root.Content = append(root.Content, scalar(key), def)
	return def
}

func nameOf(n *yaml.Node) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == keyName {
			return n.Content[i+1].Value
		}
	}
	return ""
}

func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }

// NewContext builds a context from settings given in order as key, values.
func NewContext(name string) *Context {
	return &Context{Name: name, Settings: map[string]string{}, lists: map[string][]string{}}
}

// Set sets key to one value.
func (c *Context) Set(key, value string) {
	c.add(key)
	c.Settings[key] = value
	delete(c.lists, key)
}

// SetList sets key to a list of values.
func (c *Context) SetList(key string, values []string) {
	c.add(key)
	c.Settings[key] = strings.Join(values, ",")
	c.lists[key] = slices.Clone(values)
}

func (c *Context) add(key string) {
	if !slices.Contains(c.keys, key) {
		c.keys = append(c.keys, key)
	}
}

// Write writes the file to its Path, readable by its owner only since it
// may hold passwords. It writes a new file beside it and renames it into
// place, so a reader never sees half a file and a crash leaves the old one.
func (f *File) Write() error {
	if f.doc == nil {
		f.value(keyContexts, &yaml.Node{Kind: yaml.SequenceNode})
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f.doc); err != nil {
		return fmt.Errorf("encoding the config file: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encoding the config file: %w", err)
	}
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("writing the config file: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("writing the config file: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing the config file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the config file: %w", err)
	}
	// CreateTemp makes the file 0600 already; say so for whoever reads this.
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return fmt.Errorf("writing the config file: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return fmt.Errorf("writing the config file: %w", err)
	}
	return nil
}
