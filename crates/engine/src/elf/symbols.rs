//! Looking up an exported function the way the dynamic loader does: through `PT_DYNAMIC` and the
//! object's hash table (`DT_GNU_HASH`, else `DT_HASH`), reading only the hash words, symbols and
//! names on the way. Objects whose dynamic section has no hash table fall back to a scan of the
//! `.dynsym` section found through the section headers.

use super::file::{ElfInfo, Source};
use super::{LE, MAX_SYMBOLS};
use object::elf;
use object::read::elf::{Dyn as _, SectionHeader as _, Sym as _};

type Sym64 = elf::Sym64<object::LittleEndian>;
type Dyn64 = elf::Dyn64<object::LittleEndian>;
type Shdr64 = elf::SectionHeader64<object::LittleEndian>;

const SYM_SIZE: u64 = std::mem::size_of::<Sym64>() as u64;
/// Hash-chain words read per `pread` (chains are short; one read usually covers one).
const CHAIN_BATCH: u64 = 16;

/// Values of the dynamic tags a lookup needs.
#[derive(Debug, Default, Clone, Copy)]
pub struct DynTags {
    symtab: Option<u64>,
    strtab: Option<u64>,
    strsz: Option<u64>,
    syment: Option<u64>,
    hash: Option<u64>,
    gnu_hash: Option<u64>,
}

/// Accept only defined symbols of type `kind` (STT_FUNC or STT_OBJECT) with STB_GLOBAL/STB_WEAK
/// and default/protected visibility.
fn acceptable(sym: &Sym64, kind: u8) -> bool {
    let shndx = sym.st_shndx(LE);
    sym.st_type() == kind
        && matches!(sym.st_bind(), elf::STB_GLOBAL | elf::STB_WEAK)
        && shndx != elf::SHN_UNDEF
        && shndx != elf::SHN_ABS
        && matches!(sym.st_visibility(), elf::STV_DEFAULT | elf::STV_PROTECTED)
}

fn u32_at(bytes: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]])
}

/// The dynamic tags of the object (None when it has no `PT_DYNAMIC`).
pub fn dyn_tags(info: &ElfInfo, src: &(impl Source + ?Sized)) -> Result<Option<DynTags>, String> {
    let Some(seg) = info.segments.iter().find(|s| s.kind == elf::PT_DYNAMIC) else {
        return Ok(None);
    };
    let bytes = src.read_at(seg.offset, seg.filesz)?.into_owned();
    let count = bytes.len() / std::mem::size_of::<Dyn64>();
    let (entries, _) = object::pod::slice_from_bytes::<Dyn64>(&bytes, count)
        .map_err(|_| "malformed PT_DYNAMIC segment".to_string())?;
    let mut t = DynTags::default();
    for d in entries {
        let value = Some(d.d_val(LE));
        match d.tag32(LE) {
            Some(elf::DT_NULL) => break,
            Some(elf::DT_SYMTAB) => t.symtab = value,
            Some(elf::DT_STRTAB) => t.strtab = value,
            Some(elf::DT_STRSZ) => t.strsz = value,
            Some(elf::DT_SYMENT) => t.syment = value,
            Some(elf::DT_HASH) => t.hash = value,
            Some(elf::DT_GNU_HASH) => t.gnu_hash = value,
            _ => {}
        }
    }
    Ok(Some(t))
}

/// The symbol table and string table of `PT_DYNAMIC`, as file offsets.
struct Tables<'a, S: Source + ?Sized> {
    src: &'a S,
    symtab: u64,
    strtab: u64,
    strsz: u64,
    /// The symbol type looked for (STT_FUNC or STT_OBJECT).
    kind: u8,
}

impl<S: Source + ?Sized> Tables<'_, S> {
    fn symbol(&self, index: u64) -> Result<Sym64, String> {
        let bytes = self
            .src
            .read_at(
                self.symtab.saturating_add(index.saturating_mul(SYM_SIZE)),
                SYM_SIZE,
            )
            .map_err(|_| "dynamic symbol table is truncated".to_string())?
            .into_owned();
        let (sym, _) = object::pod::from_bytes::<Sym64>(&bytes)
            .map_err(|_| "dynamic symbol table is truncated".to_string())?;
        Ok(*sym)
    }

    /// Does symbol `sym` carry exactly the name `want`?
    fn named(&self, sym: &Sym64, want: &[u8]) -> bool {
        let at = u64::from(sym.st_name(LE));
        let len = want.len() as u64 + 1;
        if at.checked_add(len).is_none_or(|end| end > self.strsz) {
            return false;
        }
        match self.src.read_at(self.strtab.saturating_add(at), len) {
            Ok(name) => name[..want.len()] == *want && name[want.len()] == 0,
            Err(_) => false,
        }
    }

    /// `st_value` of the first acceptable symbol named `want` among `indices` (lowest index, as a
    /// scan of `.dynsym` would find).
    fn first(
        &self,
        indices: impl IntoIterator<Item = u64>,
        want: &[u8],
    ) -> Result<Option<u64>, String> {
        let mut best: Option<(u64, u64)> = None;
        for i in indices {
            let sym = self.symbol(i)?;
            if acceptable(&sym, self.kind)
                && self.named(&sym, want)
                && best.is_none_or(|(b, _)| i < b)
            {
                best = Some((i, sym.st_value(LE)));
            }
        }
        Ok(best.map(|(_, v)| v))
    }
}

/// st_value of an acceptable function `symbol`: through the dynamic hash table, else `.dynsym`.
pub fn find_function(
    info: &ElfInfo,
    tags: Option<&DynTags>,
    src: &(impl Source + ?Sized),
    symbol: &str,
) -> Result<Option<u64>, String> {
    find_symbol(info, tags, src, symbol, elf::STT_FUNC)
}

/// st_value of an acceptable `symbol` of type `kind` (STT_FUNC, or STT_OBJECT for a variable such
/// as `__environ`): through the dynamic hash table, else `.dynsym`.
pub fn find_symbol(
    info: &ElfInfo,
    tags: Option<&DynTags>,
    src: &(impl Source + ?Sized),
    symbol: &str,
    kind: u8,
) -> Result<Option<u64>, String> {
    let want = symbol.as_bytes();
    let Some(tags) = tags.filter(|t| t.hash.is_some() || t.gnu_hash.is_some()) else {
        return scan_sections(info, src, want, kind);
    };
    let (Some(symtab), Some(strtab), Some(strsz)) = (tags.symtab, tags.strtab, tags.strsz) else {
        return Err("PT_DYNAMIC lacks DT_SYMTAB, DT_STRTAB or DT_STRSZ".into());
    };
    if tags.syment.is_some_and(|s| s != SYM_SIZE) {
        return Err("unexpected DT_SYMENT".into());
    }
    let tables = Tables {
        src,
        symtab: info.offset_of(symtab)?,
        strtab: info.offset_of(strtab)?,
        strsz,
        kind,
    };
    match (tags.gnu_hash, tags.hash) {
        (Some(gnu), _) => gnu_lookup(&tables, info.offset_of(gnu)?, want),
        (None, Some(sysv)) => sysv_lookup(&tables, info.offset_of(sysv)?, want),
        (None, None) => unreachable!("filtered above"),
    }
}

fn gnu_hash(name: &[u8]) -> u32 {
    name.iter().fold(5381u32, |h, &c| {
        h.wrapping_mul(33).wrapping_add(u32::from(c))
    })
}

fn sysv_hash(name: &[u8]) -> u32 {
    let mut h = 0u32;
    for &c in name {
        h = (h << 4).wrapping_add(u32::from(c));
        let g = h & 0xf000_0000;
        if g != 0 {
            h ^= g >> 24;
        }
        h &= !g;
    }
    h
}

fn read_words<S: Source + ?Sized>(src: &S, off: u64, count: u64) -> Result<Vec<u32>, String> {
    let bytes = src
        .read_at(off, count * 4)
        .map_err(|_| format!("hash table is truncated at offset {off:#x}"))?;
    Ok(bytes.chunks_exact(4).map(|c| u32_at(c, 0)).collect())
}

/// `DT_GNU_HASH` lookup: Bloom filter, bucket, then the chain of equal-bucket symbols.
fn gnu_lookup<S: Source + ?Sized>(
    t: &Tables<'_, S>,
    off: u64,
    want: &[u8],
) -> Result<Option<u64>, String> {
    let head = read_words(t.src, off, 4)?;
    let (nbuckets, symoffset, bloom_size, shift) = (
        u64::from(head[0]),
        u64::from(head[1]),
        u64::from(head[2]),
        head[3],
    );
    if nbuckets == 0 || nbuckets > MAX_SYMBOLS || bloom_size == 0 || bloom_size > MAX_SYMBOLS {
        return Err("DT_GNU_HASH header is implausible".into());
    }
    let h = gnu_hash(want);
    let word_at = off.saturating_add(16 + (u64::from(h) / 64 % bloom_size) * 8);
    let word = t
        .src
        .read_at(word_at, 8)
        .map_err(|_| format!("hash table is truncated at offset {word_at:#x}"))?;
    let word = u64::from_le_bytes(word[..8].try_into().expect("8 bytes"));
    let mask = (1u64 << (h % 64)) | (1u64 << (h.checked_shr(shift).unwrap_or(0) % 64));
    if word & mask != mask {
        return Ok(None);
    }
    let buckets = off.saturating_add(16 + bloom_size * 8);
    let start = u64::from(
        read_words(
            t.src,
            buckets.saturating_add((u64::from(h) % nbuckets) * 4),
            1,
        )?[0],
    );
    if start < symoffset {
        return Ok(None);
    }
    let chains = buckets.saturating_add(nbuckets * 4);
    let mut candidates = Vec::new();
    let mut index = start;
    'chain: loop {
        let at = chains.saturating_add((index - symoffset).saturating_mul(4));
        let left = t.src.size().saturating_sub(at) / 4;
        let batch = read_words(t.src, at, CHAIN_BATCH.min(left).max(1))?;
        for value in batch {
            if (value | 1) == (h | 1) {
                candidates.push(index);
            }
            if value & 1 == 1 {
                break 'chain;
            }
            index += 1;
            if index - start > MAX_SYMBOLS {
                return Err("DT_GNU_HASH chains exceed 2^24 steps".into());
            }
        }
    }
    t.first(candidates, want)
}

/// `DT_HASH` lookup: bucket, then the chain.
fn sysv_lookup<S: Source + ?Sized>(
    t: &Tables<'_, S>,
    off: u64,
    want: &[u8],
) -> Result<Option<u64>, String> {
    let head = read_words(t.src, off, 2)?;
    let (nbucket, nchain) = (u64::from(head[0]), u64::from(head[1]));
    if nbucket == 0 || nbucket > MAX_SYMBOLS || nchain > MAX_SYMBOLS {
        return Err("DT_HASH header is implausible".into());
    }
    let h = u64::from(sysv_hash(want));
    let chains = off.saturating_add(8 + nbucket * 4);
    let mut index = u64::from(read_words(t.src, off.saturating_add(8 + (h % nbucket) * 4), 1)?[0]);
    let mut candidates = Vec::new();
    let mut steps = 0u64;
    while index != 0 {
        if index >= nchain {
            return Err("DT_HASH chain points outside the symbol table".into());
        }
        steps += 1;
        if steps > nchain {
            return Err("DT_HASH chain loops".into());
        }
        candidates.push(index);
        index = u64::from(read_words(t.src, chains.saturating_add(index * 4), 1)?[0]);
    }
    t.first(candidates, want)
}

/// Fallback for objects whose `PT_DYNAMIC` has no hash table: scan the `.dynsym` section named
/// by the section headers (reading that table and its strings, not the whole file).
fn scan_sections(
    info: &ElfInfo,
    src: &(impl Source + ?Sized),
    want: &[u8],
    kind: u8,
) -> Result<Option<u64>, String> {
    let (shoff, shnum) = info.sections;
    if shoff == 0 || shnum == 0 {
        return Err(
            "no usable dynamic symbol table: no hash table in PT_DYNAMIC and no section headers"
                .into(),
        );
    }
    let entsize = std::mem::size_of::<Shdr64>() as u64;
    let table = src.read_at(shoff, u64::from(shnum) * entsize)?.into_owned();
    let (shdrs, _) = object::pod::slice_from_bytes::<Shdr64>(&table, usize::from(shnum))
        .map_err(|_| "truncated section header table".to_string())?;
    let Some(dynsym) = shdrs.iter().find(|s| s.sh_type(LE) == elf::SHT_DYNSYM) else {
        return Err("no .dynsym section and no hash table in PT_DYNAMIC".into());
    };
    let strings = shdrs
        .get(dynsym.sh_link(LE) as usize)
        .ok_or("the .dynsym section links to no string table")?;
    let count = dynsym.sh_size(LE) / SYM_SIZE;
    if count > MAX_SYMBOLS {
        return Err("the dynamic symbol table is larger than 2^24 entries".into());
    }
    let tables = Tables {
        src,
        symtab: dynsym.sh_offset(LE),
        strtab: strings.sh_offset(LE),
        strsz: strings.sh_size(LE),
        kind,
    };
    let syms = src
        .read_at(tables.symtab, count * SYM_SIZE)
        .map_err(|_| "dynamic symbol table is truncated".to_string())?
        .into_owned();
    let (syms, _) = object::pod::slice_from_bytes::<Sym64>(&syms, count as usize)
        .map_err(|_| "dynamic symbol table is truncated".to_string())?;
    for sym in syms {
        if acceptable(sym, tables.kind) && tables.named(sym, want) {
            return Ok(Some(sym.st_value(LE)));
        }
    }
    Ok(None)
}
