package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
)

var rawMessage = reflect.TypeFor[json.RawMessage]()

// fill sets every exported field of the struct v points to, recursively,
// to a value that is not its zero value and that differs with seed; the
// fields named in skip are left as they are. A field added to a record
// later is filled too, so a round trip that drops it fails.
func fill(v any, seed int, skip ...string) {
	fillValue(reflect.ValueOf(v).Elem(), seed, skip)
}

func fillValue(v reflect.Value, seed int, skip []string) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || slices.Contains(skip, f.Name) {
				continue
			}
			fillField(v.Field(i), f.Name, seed)
		}
	default:
		panic(fmt.Sprintf("fill: %s is not a struct", v.Type()))
	}
}

func fillField(v reflect.Value, name string, seed int) {
	if v.Type() == rawMessage {
		// Raw JSON must stay JSON for the record to marshal.
		v.SetBytes(fmt.Appendf(nil, `{"%s":%d}`, name, seed))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("%s-%d", name, seed))
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(1000*seed + len(name)))
	case reflect.Float64:
		v.SetFloat(float64(1000*seed+len(name)) + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillField(p.Elem(), name, seed)
		v.Set(p)
	case reflect.Struct:
		fillValue(v, seed, nil)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillField(s.Index(0), name, seed)
		v.Set(s)
	default:
		panic(fmt.Sprintf("fill: field %s has kind %s; teach fill about it", name, v.Kind()))
	}
}
