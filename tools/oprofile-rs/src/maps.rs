//! A process's memory maps as `/proc/PID/maps` shows them: its lines
//! parsed into [`MapEntry`]s.

/// One line of `/proc/<pid>/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub offset: u64,
    pub inode: u64,
    /// Path or pseudo-name (`[vdso]`, `[heap]`), empty for anonymous memory.
    pub path: String,
}

impl MapEntry {
    pub fn is_file(&self) -> bool {
        self.path.starts_with('/')
    }
}

/// Parses `/proc/<pid>/maps` text; malformed lines are ignored.
pub fn parse_maps(text: &str) -> Vec<MapEntry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.splitn(6, ' ');
        let (Some(range), Some(perms), Some(off), Some(_dev), Some(inode)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let path = it.next().unwrap_or("").trim_start().to_string();
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(offset)) = (
            u64::from_str_radix(s, 16),
            u64::from_str_radix(e, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        out.push(MapEntry {
            start,
            end,
            perms: perms.to_string(),
            offset,
            inode: inode.parse().unwrap_or(0),
            path,
        });
    }
    out.sort_by_key(|m| m.start);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_parsing() {
        let m = parse_maps(
            "55d0c0000000-55d0c0001000 r--p 00000000 08:01 1234     /usr/bin/my prog\n\
             55d0c0001000-55d0c0002000 r-xp 00001000 08:01 1234     /usr/bin/my prog\n\
             7ffd1000-7ffd3000 r-xp 00000000 00:00 0                  [vdso]\n\
             7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n\
             garbage\n",
        );
        assert_eq!(m.len(), 4);
        let prog = m.iter().find(|e| e.offset == 0x1000).unwrap();
        assert_eq!(prog.path, "/usr/bin/my prog");
        assert!(m.iter().any(|e| e.path == "[vdso]"));
        assert!(m.iter().any(|e| e.path.is_empty()));
    }
}
