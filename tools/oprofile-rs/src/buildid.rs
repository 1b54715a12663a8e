//! Build-ids: the GNU build-id (`NT_GNU_BUILD_ID`) of an ELF image, of an
//! ELF file and of a sequence of notes, as hex; what a build-id may be (hex
//! only, before it goes into a path or a URL); and the `.build-id/ab/cdef…`
//! path of one.

use std::path::{Path, PathBuf};

/// Hex of a build-id's bytes.
pub fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The build-id of an ELF image (`NT_GNU_BUILD_ID`), if it has one.
pub fn build_id(data: &[u8]) -> Option<Vec<u8>> {
    use object::Object;
    object::File::parse(data)
        .ok()?
        .build_id()
        .ok()
        .flatten()
        .map(<[u8]>::to_vec)
}

/// The build-id of the ELF file at `path` (hex), reading only the parts of
/// the file that hold it.
pub fn file_build_id(path: &Path) -> Option<String> {
    use object::Object;
    let f = std::fs::File::open(path).ok()?;
    let cache = object::ReadCache::new(f);
    let obj = object::File::parse(&cache).ok()?;
    obj.build_id().ok().flatten().map(hex)
}

/// Whether `id` is a build-id as hex (what may go into a URL and a path).
pub fn valid_build_id(id: &str) -> bool {
    (2..=128).contains(&id.len())
        && id.len().is_multiple_of(2)
        && id
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// `.build-id/ab/cdef…` (`.debug` appended for a debug file) of build-id
/// `id` (hex), relative to a directory of that layout.
pub fn build_id_path(id: &str, debug: bool) -> Option<PathBuf> {
    if !valid_build_id(id) {
        return None;
    }
    let (first, rest) = id.split_at(2);
    let name = if debug {
        format!("{rest}.debug")
    } else {
        rest.to_string()
    };
    Some(PathBuf::from(".build-id").join(first).join(name))
}

/// The GNU build-id (hex) in a sequence of ELF notes, as the kernel shows
/// its own in `/sys/kernel/notes` and a module's in
/// `/sys/module/NAME/notes/.note.gnu.build-id` (the machine's byte order;
/// 4-byte aligned). `None` for garbage or where no such note is.
pub fn build_id_from_notes(data: &[u8]) -> Option<String> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(
            data.get(at..at.checked_add(4)?)?.try_into().ok()?,
        ))
    };
    let align = |n: usize| n.checked_add(3).map(|n| n & !3);
    let mut at = 0usize;
    while at.checked_add(12)? <= data.len() {
        let namesz = word(at)? as usize;
        let descsz = word(at + 4)? as usize;
        let ty = word(at + 8)?;
        let name_at = at + 12;
        let desc_at = name_at.checked_add(align(namesz)?)?;
        let end = desc_at.checked_add(align(descsz)?)?;
        let name = data.get(name_at..name_at.checked_add(namesz)?)?;
        let desc = data.get(desc_at..desc_at.checked_add(descsz)?)?;
        if ty == NT_GNU_BUILD_ID && name == b"GNU\0" && !desc.is_empty() {
            return Some(hex(desc));
        }
        if end <= at {
            return None;
        }
        at = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(name: &[u8], ty: u32, desc: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend((name.len() as u32).to_ne_bytes());
        v.extend((desc.len() as u32).to_ne_bytes());
        v.extend(ty.to_ne_bytes());
        v.extend(name);
        v.resize(v.len().next_multiple_of(4), 0);
        v.extend(desc);
        v.resize(v.len().next_multiple_of(4), 0);
        v
    }

    #[test]
    fn the_gnu_build_id_note_is_found_among_others() {
        // As /sys/kernel/notes: Xen and Linux notes before the build-id.
        let mut notes = note(b"Xen\0", 6, b"xen-3.0\0");
        notes.extend(note(b"Linux\0", 1, &[1, 2, 3]));
        notes.extend(note(b"GNU\0", 3, &[0xde, 0xad, 0xbe, 0xef, 0x01]));
        assert_eq!(build_id_from_notes(&notes).as_deref(), Some("deadbeef01"));
        // A GNU note of another type is not the build-id.
        assert_eq!(build_id_from_notes(&note(b"GNU\0", 1, &[1, 2, 3, 4])), None);
    }

    #[test]
    fn garbage_notes_give_none_never_a_panic() {
        assert_eq!(build_id_from_notes(&[]), None);
        assert_eq!(build_id_from_notes(&[0xff; 11]), None);
        assert_eq!(build_id_from_notes(&[0xff; 64]), None);
        // Sizes pointing past the end.
        let mut bad = note(b"GNU\0", 3, &[1, 2, 3, 4]);
        bad[4..8].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(build_id_from_notes(&bad), None);
        let mut huge = note(b"GNU\0", 3, &[1, 2, 3, 4]);
        huge[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(build_id_from_notes(&huge), None);
    }

    #[test]
    fn build_id_paths_are_of_hex_only() {
        assert_eq!(
            build_id_path("abcdef", false).unwrap(),
            Path::new(".build-id/ab/cdef")
        );
        assert_eq!(
            build_id_path("abcdef", true).unwrap(),
            Path::new(".build-id/ab/cdef.debug")
        );
        assert_eq!(build_id_path("../x", false), None);
    }

    #[test]
    fn build_ids_are_checked_before_they_go_into_urls_and_paths() {
        assert!(valid_build_id("0123456789abcdef"));
        assert!(!valid_build_id(""));
        assert!(!valid_build_id("abc"));
        assert!(!valid_build_id("../../etc/passwd"));
        assert!(!valid_build_id("ABCD"));
        assert!(!valid_build_id(&"a".repeat(130)));
    }
}
