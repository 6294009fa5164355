//! Large read-only tables in memory the kernel is asked to back with huge pages.
//!
//! A table of tens of megabytes looked up at random addresses (the blocks of a million-CIDR
//! address index) spans thousands of 4 KiB pages, far more than the TLB maps: most lookups
//! would also walk the page tables. Backed by 2 MiB pages it spans a few dozen. The memory is
//! an anonymous mapping advised `MADV_HUGEPAGE` before it is first written (Linux with
//! transparent huge pages in `madvise` or `always` mode; elsewhere, or when the kernel declines,
//! ordinary pages). Should the mapping fail, the bytes live on the heap.

/// Bytes in huge-page-backed memory when the system allows it.
pub(crate) struct PageBytes {
    memory: Memory,
    len: usize,
}

enum Memory {
    Mapped(memmap2::MmapMut),
    Heap(Box<[u8]>),
}

impl PageBytes {
    /// A copy of `bytes`.
    pub(crate) fn copy_of(bytes: &[u8]) -> Self {
        Self::filled(bytes.len(), |out| out.copy_from_slice(bytes))
    }

    /// `len` bytes, zeroed, then written by `fill` in place (a table built where it stays: no
    /// heap copy to free afterwards, which the allocator might keep resident).
    pub(crate) fn filled(len: usize, fill: impl FnOnce(&mut [u8])) -> Self {
        let memory = match memmap2::MmapMut::map_anon(len.max(1)) {
            Ok(mut map) => {
                // Before the first write: the pages are allocated (huge, if granted) when
                // first touched. Declined advice leaves ordinary pages, which work the same.
                #[cfg(target_os = "linux")]
                let _ = map.advise(memmap2::Advice::HugePage);
                fill(&mut map[..len]);
                Memory::Mapped(map)
            }
            Err(_) => {
                let mut heap = vec![0u8; len].into_boxed_slice();
                fill(&mut heap);
                Memory::Heap(heap)
            }
        };
        Self { memory, len }
    }

    /// The bytes.
    #[inline(always)]
    pub(crate) fn bytes(&self) -> &[u8] {
        match &self.memory {
            Memory::Mapped(map) => &map[..self.len],
            Memory::Heap(heap) => heap,
        }
    }
}

impl Clone for PageBytes {
    fn clone(&self) -> Self {
        Self::copy_of(self.bytes())
    }
}

impl std::fmt::Debug for PageBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageBytes")
            .field("len", &self.len)
            .field("mapped", &matches!(self.memory, Memory::Mapped(_)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_and_clones_its_bytes() {
        let source: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8).collect();
        let pages = PageBytes::copy_of(&source);
        assert_eq!(pages.bytes(), &source[..]);
        assert_eq!(pages.clone().bytes(), &source[..]);
        assert!(PageBytes::copy_of(&[]).bytes().is_empty());
    }
}
