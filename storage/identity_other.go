//go:build !unix

package storage

func identityOf(f File) (Identity, error) {
	fi, err := f.Stat()
	if err != nil {
		return Identity{}, err
	}
	return identityOfInfo(fi), nil
}
