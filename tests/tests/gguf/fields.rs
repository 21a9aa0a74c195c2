//! The field walker of the gguf tests (re-exported by util.rs): where each field of a valid
//! GGUF file lies, so that a test can corrupt exactly one, and little-endian patching.

/// Where one KV pair's fields lie.
#[derive(Debug)]
pub struct KvAt {
    pub key: String,
    /// The key's length prefix.
    pub at: usize,
    pub type_at: usize,
    pub value_at: usize,
    /// For an array: (element type, count) positions.
    pub array_at: Option<(usize, usize)>,
}

/// Where one tensor info's fields lie.
#[derive(Debug)]
pub struct InfoAt {
    pub name: String,
    pub at: usize,
    pub n_dims_at: usize,
    pub dims_at: Vec<usize>,
    pub type_at: usize,
    pub offset_at: usize,
}

/// The field map of a valid file.
#[derive(Debug, Default)]
pub struct Fields {
    pub kvs: Vec<KvAt>,
    pub infos: Vec<InfoAt>,
    /// Every u32 field (magic, version, types, n_dims).
    pub u32s: Vec<usize>,
    /// Every u64 field (counts, lengths, dims, offsets).
    pub u64s: Vec<usize>,
    pub infos_end: usize,
}

impl Fields {
    pub fn kv(&self, key: &str) -> &KvAt {
        self.kvs
            .iter()
            .find(|k| k.key == key)
            .expect("the seed should have this key")
    }
    pub fn info(&self, name: &str) -> &InfoAt {
        self.infos
            .iter()
            .find(|t| t.name == name)
            .expect("the seed should have this tensor")
    }
}

/// Records the position of every field of `bytes`, which must be a valid file.
pub fn walk(bytes: &[u8]) -> Fields {
    let mut w = Walker {
        b: bytes,
        pos: 0,
        f: Fields::default(),
    };
    w.u32();
    w.u32();
    let n_tensors = w.u64();
    let n_kv = w.u64();
    for _ in 0..n_kv {
        let at = w.pos;
        let key = w.string();
        let type_at = w.pos;
        let ty = w.u32();
        let value_at = w.pos;
        let array_at = (ty == 9).then(|| (w.pos, w.pos + 4));
        w.value(ty);
        w.f.kvs.push(KvAt {
            key,
            at,
            type_at,
            value_at,
            array_at,
        });
    }
    for _ in 0..n_tensors {
        let at = w.pos;
        let name = w.string();
        let n_dims_at = w.pos;
        let n_dims = w.u32();
        let dims_at = (0..n_dims).map(|_| (w.pos, w.u64()).0).collect();
        let type_at = w.pos;
        w.u32();
        let offset_at = w.pos;
        w.u64();
        w.f.infos.push(InfoAt {
            name,
            at,
            n_dims_at,
            dims_at,
            type_at,
            offset_at,
        });
    }
    w.f.infos_end = w.pos;
    w.f
}

struct Walker<'a> {
    b: &'a [u8],
    pos: usize,
    f: Fields,
}

impl Walker<'_> {
    fn u32(&mut self) -> u32 {
        self.f.u32s.push(self.pos);
        self.pos += 4;
        u32::from_le_bytes(self.b[self.pos - 4..self.pos].try_into().unwrap())
    }
    fn u64(&mut self) -> u64 {
        self.f.u64s.push(self.pos);
        self.pos += 8;
        u64::from_le_bytes(self.b[self.pos - 8..self.pos].try_into().unwrap())
    }
    fn string(&mut self) -> String {
        let n = self.u64() as usize;
        self.pos += n;
        String::from_utf8(self.b[self.pos - n..self.pos].to_vec()).unwrap()
    }
    fn value(&mut self, ty: u32) {
        match ty {
            0 | 1 | 7 => self.pos += 1,
            2 | 3 => self.pos += 2,
            4..=6 => self.pos += 4,
            10..=12 => self.pos += 8,
            8 => {
                self.string();
            }
            9 => {
                let elem = self.u32();
                for _ in 0..self.u64() {
                    self.value(elem);
                }
            }
            _ => panic!("walk() needs a valid file"),
        }
    }
}

/// Overwrites a little-endian u32 / u64 at `at`.
pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
pub fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
