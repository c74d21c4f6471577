package gateway_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway"
)

// openAPIProperty is what TestOpenAPISchemasMatchGoTypes reads of one
// property of a schema.
type openAPIProperty struct {
	Type     string `yaml:"type"`
	Format   string `yaml:"format"`
	Nullable bool   `yaml:"nullable"`
	Ref      string `yaml:"$ref"`
}

// TestOpenAPISchemasMatchGoTypes: the schemas named here list exactly the
// JSON fields of the Go type the server answers with, each of the JSON
// type it is written as, nullable exactly when the Go field is a pointer.
// A field added to the type and forgotten in the document fails it.
func TestOpenAPISchemasMatchGoTypes(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]openAPIProperty `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(gateway.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{
		"MembersResponse": protocol.MembersResponse{},
		"Member":          protocol.Member{},
		"ShardProgress":   protocol.ShardProgress{},
		"Shard":           protocol.Shard{},
	} {
		schema, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		typ := reflect.TypeOf(v)
		fields := map[string]bool{}
		for i := range typ.NumField() {
			f := typ.Field(i)
			jsonName, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || jsonName == "-" {
				continue
			}
			if jsonName == "" {
				jsonName = f.Name
			}
			fields[jsonName] = true
			p, ok := schema.Properties[jsonName]
			if !ok {
				t.Errorf("%s: %s (%s.%s) is not in the schema", name, jsonName, typ.Name(), f.Name)
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
				if !p.Nullable {
					t.Errorf("%s.%s: a pointer in Go (JSON null when absent), not nullable in the schema", name, jsonName)
				}
			} else if p.Nullable {
				t.Errorf("%s.%s: nullable in the schema, never null in Go", name, jsonName)
			}
			if want := jsonType(ft); p.Ref == "" && p.Type != want || p.Ref != "" && want != "object" {
				t.Errorf("%s.%s: schema type %q%s, Go writes %s", name, jsonName, p.Type, p.Ref, want)
			}
			if ft == reflect.TypeOf(time.Time{}) && p.Format != "date-time" {
				t.Errorf("%s.%s: a time without format date-time", name, jsonName)
			}
		}
		for prop := range schema.Properties {
			if !fields[prop] {
				t.Errorf("%s: the schema lists %s, which %s does not have", name, prop, typ.Name())
			}
		}
	}
}

// jsonType is the JSON type encoding/json writes a value of t as.
func jsonType(t reflect.Type) string {
	if t == reflect.TypeOf(time.Time{}) {
		return "string"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	default:
		return "object"
	}
}
