"""flashgen's attention inside other libraries: each module registers it
where that library looks for attention implementations, and is imported on
its own (it needs the library it integrates with)."""
