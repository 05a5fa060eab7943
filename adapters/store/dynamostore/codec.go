package dynamostore

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// The item layout: the key in pk (S, partition) and sk (S, sort), each row attribute in an item
// attribute of its own, with its native type.
const (
	attrPK = "pk"
	attrSK = "sk"
	// escape prefixes row attribute names that would collide with the key attributes ("pk" is
	// stored as "~pk"), and names that start with it ("~x" as "~~x"), so the mapping is
	// one-to-one and no update can overwrite a key.
	escape = "~"
	// noopAttr can never hold a row attribute (escaped names that start with "~" are longer):
	// "REMOVE ~" is the update expression of an update that changes nothing but must still
	// create a missing row.
	noopAttr = escape
)

// DynamoDB's item size limit (400 KB, counting attribute names) and key length limits.
const (
	MaxItemBytes      = 400 * 1024
	maxPartitionBytes = 2048
	maxSortBytes      = 1024
)

// storedName is the item attribute that holds row attribute name.
func storedName(name string) string {
	if name == attrPK || name == attrSK || strings.HasPrefix(name, escape) {
		return escape + name
	}
	return name
}

// rowName reverses storedName.
func rowName(stored string) string { return strings.TrimPrefix(stored, escape) }

func checkKey(k store.Key) error {
	if err := checkKeyPart("partition", k.Partition, maxPartitionBytes); err != nil {
		return err
	}
	return checkKeyPart("sort", k.Sort, maxSortBytes)
}

func checkKeyPart(what, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s key: DynamoDB keys cannot be empty strings", store.ErrInvalid, what)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s key %q is not valid UTF-8", store.ErrInvalid, what, s)
	case len(s) > max:
		return fmt.Errorf("%w: %s key is %d bytes, DynamoDB allows %d", store.ErrInvalid, what, len(s), max)
	}
	return nil
}

func keyItem(k store.Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: k.Partition},
		attrSK: &types.AttributeValueMemberS{Value: k.Sort},
	}
}

// encodeValue converts a row value (see store.Attrs) to its native DynamoDB type. Strings must be
// valid UTF-8: the JSON protocol would silently replace invalid bytes.
func encodeValue(v any) (types.AttributeValue, error) {
	switch x := v.(type) {
	case int64:
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(x, 10)}, nil
	case string:
		if !utf8.ValidString(x) {
			return nil, fmt.Errorf("%w: string %q is not valid UTF-8, which DynamoDB cannot store", store.ErrInvalid, x)
		}
		return &types.AttributeValueMemberS{Value: x}, nil
	case []byte:
		if x == nil {
			x = []byte{}
		}
		return &types.AttributeValueMemberB{Value: x}, nil
	case bool:
		return &types.AttributeValueMemberBOOL{Value: x}, nil
	case map[string]any:
		m := make(map[string]types.AttributeValue, len(x))
		for k, e := range x {
			if !utf8.ValidString(k) {
				return nil, fmt.Errorf("%w: map key %q is not valid UTF-8", store.ErrInvalid, k)
			}
			if _, nested := e.(map[string]any); nested {
				return nil, fmt.Errorf("%w: maps may not nest", store.ErrInvalid)
			}
			av, err := encodeValue(e)
			if err != nil {
				return nil, err
			}
			m[k] = av
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("%w: unsupported value type %T", store.ErrInvalid, v)
}

// decodeItem returns the row attributes of an item (nil for no item).
func decodeItem(item map[string]types.AttributeValue) (store.Attrs, error) {
	if item == nil {
		return nil, nil
	}
	out := make(store.Attrs, len(item))
	for name, av := range item {
		if name == attrPK || name == attrSK {
			continue
		}
		v, err := decodeValue(av, true)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", rowName(name), err)
		}
		out[rowName(name)] = v
	}
	return out, nil
}

func decodeValue(av types.AttributeValue, mapAllowed bool) (any, error) {
	switch x := av.(type) {
	case *types.AttributeValueMemberS:
		return x.Value, nil
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(x.Value, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("number %s is not an int64, which ssfkit rows never hold", x.Value)
		}
		return n, nil
	case *types.AttributeValueMemberB:
		if x.Value == nil {
			return []byte{}, nil
		}
		return x.Value, nil
	case *types.AttributeValueMemberBOOL:
		return x.Value, nil
	case *types.AttributeValueMemberM:
		if mapAllowed {
			m := make(map[string]any, len(x.Value))
			for k, e := range x.Value {
				v, err := decodeValue(e, false)
				if err != nil {
					return nil, fmt.Errorf("entry %q: %w", k, err)
				}
				m[k] = v
			}
			return m, nil
		}
	}
	return nil, fmt.Errorf("DynamoDB type %T is not one ssfkit writes", av)
}

// itemSize is the item's size by DynamoDB's rules: attribute names plus values, 3 bytes per map
// and 1 per map entry, about one byte per two significant digits of a number.
func itemSize(k store.Key, a store.Attrs) int {
	n := len(attrPK) + len(k.Partition) + len(attrSK) + len(k.Sort)
	for name, v := range a {
		n += len(storedName(name)) + valueSize(v)
	}
	return n
}

func valueSize(v any) int {
	switch x := v.(type) {
	case int64:
		digits := strings.TrimRight(strings.TrimPrefix(strconv.FormatInt(x, 10), "-"), "0")
		return (len(digits)+1)/2 + 1
	case string:
		return len(x)
	case []byte:
		return len(x)
	case map[string]any:
		n := 3
		for k, e := range x {
			n += len(k) + valueSize(e) + 1
		}
		return n
	}
	return 1 // bool
}
