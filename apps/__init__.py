"""Sample apps on the public edgert API: the XR demo (the main job) and tree-model apps."""
