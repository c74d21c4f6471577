package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/alecthomas/kong"
	"go.yaml.in/yaml/v3"

	"github.com/rscoord/rscoord/gateway/auth"
)

// configCommand is the command whose flags a --config file sets.
const configCommand = "serve"

// yamlConfig is a --config file: a YAML mapping from serve's long flag
// names (without the dashes) to their values. It is a kong resolver, so a
// value from the file is parsed and checked exactly as the same flag on the
// command line; the command line and the flag's environment variable both
// take precedence over the file.
type yamlConfig struct {
	values map[string]any
}

var _ kong.Resolver = (*yamlConfig)(nil)

// loadYAMLConfig is the kong.ConfigurationLoader of --config.
func loadYAMLConfig(r io.Reader) (kong.Resolver, error) {
	// kong hands over the file it opened; its mode is checked like the
	// users file's, since a config file can turn authentication off.
	if f, ok := r.(*os.File); ok {
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		if err := auth.CheckNotSharedWritable(f.Name(), fi.Mode()); err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
	}
	var raw any
	if err := yaml.NewDecoder(r).Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return &yamlConfig{values: map[string]any{}}, nil // an empty file sets nothing
		}
		return nil, fmt.Errorf("config file: %w", err)
	}
	top, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("config file: want a mapping of flag names to values, not %T", raw)
	}
	values := make(map[string]any, len(top))
	for key, v := range top {
		switch v := v.(type) {
		case nil:
			return nil, fmt.Errorf("config file: key %q has no value", key)
		case map[string]any:
			return nil, fmt.Errorf("config file: key %q: want a value or a list, not a mapping", key)
		case []any:
			list := make([]any, len(v))
			for i, e := range v {
				s, err := scalarString(e)
				if err != nil {
					return nil, fmt.Errorf("config file: key %q item %d: %w", key, i, err)
				}
				list[i] = s
			}
			values[key] = list
		default:
			s, err := scalarString(v)
			if err != nil {
				return nil, fmt.Errorf("config file: key %q: %w", key, err)
			}
			values[key] = s
		}
	}
	return &yamlConfig{values: values}, nil
}

// scalarString renders a YAML scalar as the command line would spell it,
// so that a bare number is not taken for nanoseconds by a duration flag:
// "member-lease: 15" fails as "--member-lease 15" does.
func scalarString(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int:
		return strconv.Itoa(v), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	}
	return "", fmt.Errorf("want a string, number or boolean, not %T", v)
}

// Validate refuses keys that are not flags of serve, naming them.
func (c *yamlConfig) Validate(app *kong.Application) error {
	known := map[string]bool{}
	for _, cmd := range app.Children {
		if cmd.Name != configCommand {
			continue
		}
		for _, f := range cmd.Flags {
			if f.Name != "config" && f.Name != "help" {
				known[f.Name] = true
			}
		}
	}
	var unknown []string
	for key := range c.values {
		if !known[key] {
			unknown = append(unknown, strconv.Quote(key))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("config file: unknown key %s: keys are serve's long flag names without the leading --, e.g. \"member-lease\" (rscoord serve --help lists them)",
		strings.Join(unknown, ", "))
}

// Resolve gives flag its value from the file, unless its environment
// variable is set: the environment overrides the file (and kong only asks
// for flags the command line left unset).
func (c *yamlConfig) Resolve(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
	for _, env := range flag.Tag.Envs {
		if _, set := os.LookupEnv(env); set {
			return nil, nil
		}
	}
	if aliasSetFor(os.LookupEnv, flag.Tag.Envs) {
		return nil, nil // the reference design's name of the variable
	}
	v, ok := c.values[flag.Name]
	if !ok {
		return nil, nil
	}
	return v, nil
}
