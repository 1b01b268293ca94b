// unit tests: written below
