package trunk

import (
	"errors"
	"fmt"

	"github.com/k3-project/k3/internal/fileio/strictjson"
)

// ErrOtherModel reports a packed trunk whose trunk.json names another model than the one being
// opened, or no model at all (§8.3): its layers would run with another model's embedding,
// experts and head, and produce tokens of neither.
var ErrOtherModel = errors.New("trunk: packed trunk of another model")

// parseModel reads trunk.json's optional "model": the identity (§3.6) of the checkpoint the trunk
// was packed from, 64 lowercase hex digits.
func parseModel(v *strictjson.Value) (string, error) {
	f := v.Get("model")
	if f == nil {
		return "", nil
	}
	s, err := f.Str()
	if err != nil {
		return "", layoutErr("model: %v", err)
	}
	if !isIdentity(s) {
		return "", layoutErr("model %q is not 64 lowercase hex digits", s)
	}
	return s, nil
}

func isIdentity(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkModel refuses a trunk packed from another model than want ("" checks nothing). A trunk.json
// without a model (written before identities, or by another packer) is refused too: nothing ties
// it to the model's content.
func checkModel(got, want string) error {
	switch {
	case want == "" || got == want:
		return nil
	case got == "":
		return fmt.Errorf("%w: trunk.json names no model (packed before model identities, or by another packer): repack it from this model", ErrOtherModel)
	}
	return fmt.Errorf("%w: packed from model %s, this model is %s (repack it from this model)", ErrOtherModel, got, want)
}
