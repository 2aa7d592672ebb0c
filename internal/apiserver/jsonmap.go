package apiserver

import (
	"encoding/json"
	"slices"
	"strconv"
)

// marshalJSONMap writes doc, a map of JSON values as strategicpatch
// handles them, byte for byte as encoding/json.Marshal does: keys sorted,
// no spaces, HTML characters escaped. encoding/json reaches every key and
// value of such a map through reflection, boxing each one; this walks them
// directly. Strings it cannot copy as they are, numbers other than int64,
// and any type but the JSON ones go through encoding/json one by one.
func marshalJSONMap(doc map[string]interface{}) ([]byte, error) {
	return appendJSONValue(make([]byte, 0, 4096), doc)
}

func appendJSONValue(dst []byte, v interface{}) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendJSONString(dst, v)
	case bool:
		return strconv.AppendBool(dst, v), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case map[string]interface{}:
		if v == nil {
			return append(dst, "null"...), nil
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSONString(dst, k); err != nil {
				return nil, err
			}
			dst = append(dst, ':')
			if dst, err = appendJSONValue(dst, v[k]); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case []interface{}:
		if v == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSONValue(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	default:
		data, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return append(dst, data...), nil
	}
}

// appendJSONString quotes s as encoding/json does. Only printable ASCII
// other than the quote, the backslash and <, > and & (which encoding/json
// escapes for HTML) is copied as it is; a string with anything else goes
// through encoding/json.
func appendJSONString(dst []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			data, err := json.Marshal(s)
			if err != nil {
				return nil, err
			}
			return append(dst, data...), nil
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"'), nil
}
